#!/usr/bin/env bash
# Spark's S3 connector, so writers' Spark sources on object storage (s3a:// and s3:// paths) can be read:
# hadoop-aws of exactly the Hadoop release pyspark ships, and the AWS SDK v2 bundle that release was
# built against (read from its hadoop-project POM, never guessed). Each file is checked against the
# SHA-1 the repository publishes beside it; any mismatch or missing file fails the build.
#
#   install-s3a.sh JARS_DIR        (MAVEN_REPO overrides https://repo1.maven.org/maven2)
set -euo pipefail

jars="${1:?usage: install-s3a.sh JARS_DIR}"
repo="${MAVEN_REPO:-https://repo1.maven.org/maven2}"

hadoop="$(find "$jars" -maxdepth 1 -name 'hadoop-client-api-*.jar' -printf '%f\n' \
          | sed -n 's/^hadoop-client-api-\(.*\)\.jar$/\1/p' | head -n 1)"
if [ -z "$hadoop" ]; then
    echo "install-s3a.sh: no hadoop-client-api-*.jar in $jars: is it pyspark's jars directory?" >&2
    exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# fetch PATH DEST: download and verify against PATH.sha1; DEST appears only once verified
fetch() {
    curl -fsSL --retry 3 -o "$work/file" "$repo/$1"
    curl -fsSL --retry 3 -o "$work/file.sha1" "$repo/$1.sha1"
    if ! echo "$(cut -c1-40 "$work/file.sha1")  $work/file" | sha1sum --check --status -; then
        echo "install-s3a.sh: $1 does not match its published SHA-1" >&2
        exit 1
    fi
    mv "$work/file" "$2"
}

fetch "org/apache/hadoop/hadoop-project/$hadoop/hadoop-project-$hadoop.pom" "$work/project.pom"
sdk="$(sed -n 's:.*<aws-java-sdk-v2.version>\([^<]*\)</aws-java-sdk-v2.version>.*:\1:p' "$work/project.pom" \
       | head -n 1)"
if [ -z "$sdk" ]; then
    echo "install-s3a.sh: hadoop-project-$hadoop.pom names no aws-java-sdk-v2.version" >&2
    exit 1
fi
fetch "org/apache/hadoop/hadoop-aws/$hadoop/hadoop-aws-$hadoop.jar" "$jars/hadoop-aws-$hadoop.jar"
fetch "software/amazon/awssdk/bundle/$sdk/bundle-$sdk.jar" "$jars/awssdk-bundle-$sdk.jar"
echo "install-s3a.sh: hadoop-aws $hadoop and AWS SDK bundle $sdk in $jars"
