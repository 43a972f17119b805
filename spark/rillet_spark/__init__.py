"""PySpark Structured Streaming job that reads rillet (or any Kafka) with Spark's Kafka source.

Modules:
  events   the event schema, JSON parsing and the windowed aggregation (pure DataFrame code)
  session  the SparkSession with the Kafka source jars on spark.jars
  job      the configurable streaming program (read -> parse -> aggregate -> Parquet + checkpoint)
  produce  a producer of sample events, for the demo and by hand
  show     prints the job's Parquet output as a table
"""
