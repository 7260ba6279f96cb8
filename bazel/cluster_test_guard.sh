# Sourced by sh_tests that bring up tools/cluster (after sh_test_cases.sh).
# skip_unless_cluster_free CLUSTER CASE...: skips every case, with the reason,
# where the machine lacks the rights or a cluster is already up (the cluster's
# state is machine-wide, so two such tests cannot share it).
skip_unless_cluster_free() {
  local cluster=$1 reason c
  shift
  if ! reason=$("$cluster" check 2>&1); then
    for c in "$@"; do skip_case "$c" "$reason"; done
    finish_cases
  fi
  if [ -e /run/zeroshard-cluster ] || ip netns list | grep -q '^zs-'; then
    for c in "$@"; do skip_case "$c" "a zeroshard cluster is already up on this machine (tools/cluster down)"; done
    finish_cases
  fi
}
