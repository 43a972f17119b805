"""Record the Kafka request frames real clients send to rillet, into the fuzz corpus.

    .venv/bin/python -m tests.fuzz.capture                       # every source (~4 min)
    .venv/bin/python -m tests.fuzz.capture --only java,sasl      # some; others' files stay

Each client source gets a fresh single-node broker (tests/harness.py BrokerProcess) behind a
RecordingProxy (tests/fuzz/recording.py): the broker advertises the proxy's address, so every
connection a client opens, after Metadata too, is recorded. The workload drives as many APIs
as the client offers; whatever the broker answers (an error, a refusal) does not matter, the
frames the client sent do. The sources:

- java: Apache Kafka's CLI tools (tools/kafka/), so the Java client.
- java-txn: kafka-transactions: abort by producer id, the Java Admin client's WriteTxnMarkers
  (the one client that sends it; brokers' transaction coordinators send it too), and
  describe-producers / find-hanging (DescribeProducers), a transactional
  kafka-producer-perf-test and list / describe (ListTransactions, DescribeTransactions). A
  source of its own so adding it did not re-record the java file.
- librdkafka-txn: confluent-kafka's transactional producer in a consume-transform-produce
  loop (AddOffsetsToTxn, TxnOffsetCommit, EndTxn commit and abort); its own source likewise.
- librdkafka: confluent-kafka; kafka-python; aiokafka: their producers, consumers, admins.
- sasl: a SASL_PLAINTEXT broker; PLAIN and SCRAM logins of every client above.
- rillet (listener controller): a 3-node LocalCluster whose controller links are tapped
  (tests/tcp_proxy.py LinkProxy tap): Vote, BeginQuorumEpoch, EndQuorumEpoch, metadata Fetch,
  FetchSnapshot, BrokerRegistration, BrokerHeartbeat, AlterPartition, Envelope, driven by
  topic changes, produce, a SIGTERM and a SIGKILL of nodes and a snapshot a node must fetch.

At most MAX_PER_VERSION frames per (source, API key, version) are kept: distinct ones (the
correlation id aside), spread over their sizes, in the order they were sent. Produce batches
are kept small by the workloads, so no frame is far above 16 KB. At the end a table says which
versions of which API each source sent, and which served APIs no source sent. Tool and call
failures are listed too: they may be rillet bugs, or a client feature rillet leaves out.
Every broker, proxy and temp dir ends in a finally block; every tool and call is bounded.

The modules: __main__.py (the options, the capture of each chosen source, writing the
corpus), common.py (a source's Run, the recorded broker, timeouts, broker config), a
workload per source (java.py, librdkafka.py, kafka_python.py, aiokafka.py, sasl.py and
controller.py for rillet) and report.py (which frames are kept, the closing table).
"""
