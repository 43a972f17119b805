#!/usr/bin/env bash
# Entry point of the rillet Spark image, for Spark on Kubernetes and for plain runs.
#
# spark-submit --master k8s://... --deploy-mode cluster starts the driver pod with
#   driver --properties-file ... --class ... local:///opt/rillet/spark/windowed_counts.py ARGS
# and the driver starts executor pods with the single argument `executor`, passing everything
# else as environment variables (SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, ...). Both are handled
# here; any other command is run as given (e.g. `python3 -m rillet_spark.show /data/out`).
set -euo pipefail

# The driver and executors run as an arbitrary uid; the JVM wants a passwd entry for it
# (user.name, Hadoop's UserGroupInformation), so add one when it is missing.
if ! getent passwd "$(id -u)" >/dev/null 2>&1 && [ -w /etc/passwd ]; then
  echo "spark:x:$(id -u):0:spark:${HOME:-/opt/spark/work-dir}:/bin/false" >> /etc/passwd
fi

# Spark passes executor JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in order.
java_opts=()
while IFS='=' read -r name _; do
  java_opts+=("${!name}")
done < <(env | grep -E '^SPARK_JAVA_OPT_[0-9]+=' | sort -t_ -k4 -n)

classpath="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}${SPARK_HOME}/jars/*"
if [ -n "${SPARK_EXTRA_CLASSPATH:-}" ]; then
  classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
fi

case "${1:-}" in
  driver)
    shift
    # Client deploy mode inside the driver pod: this process is the driver.
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    exec "$JAVA_HOME/bin/java" "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "$classpath" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?}" \
      --executor-id "${SPARK_EXECUTOR_ID:?}" \
      --cores "${SPARK_EXECUTOR_CORES:?}" \
      --app-id "${SPARK_APPLICATION_ID:?}" \
      --hostname "${SPARK_EXECUTOR_POD_IP:?}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
