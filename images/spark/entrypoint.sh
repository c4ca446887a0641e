#!/bin/bash
# Entrypoint of the weir-spark image. A driver pod sets its own command (spark-submit), so this runs for
# executor pods and anything else: Spark on Kubernetes starts an executor container with the argument
# `executor` and describes it in environment variables (SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, ...; the
# JVM options as SPARK_JAVA_OPT_0, _1, ... in order). Any other command runs as given.
set -euo pipefail

if [ "${1:-}" != "executor" ]; then
  exec "$@"
fi

opts=()
for name in $(compgen -e | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n); do
  opts+=("${!name}")
done

exec java "${opts[@]}" \
  -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
  -cp "${SPARK_CONF_DIR:-${SPARK_HOME}/conf}:${SPARK_HOME}/jars/*" \
  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "${SPARK_DRIVER_URL}" \
  --executor-id "${SPARK_EXECUTOR_ID}" \
  --cores "${SPARK_EXECUTOR_CORES}" \
  --app-id "${SPARK_APPLICATION_ID}" \
  --hostname "${SPARK_EXECUTOR_POD_IP}" \
  --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
  --podName "${SPARK_EXECUTOR_POD_NAME}"
