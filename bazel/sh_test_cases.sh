# Sourced by shell tests so each check counts as its own test case.
#   record_case NAME PASSED(0/1) [MESSAGE]   -- after each check
#   skip_case NAME REASON                    -- a check this machine cannot make
#   expect NAME WANT_RC WANT_SUBSTRING -- COMMAND...
#                                            -- runs COMMAND, checks its exit code and output
#   finish_cases                             -- writes $XML_OUTPUT_FILE, exits 1 if any failed
#   test_seed SCOPE                          -- prints the script's seed: fixed per SCOPE unless
#                                               ZS_TEST_SEED is "random" or a number (as the
#                                               C++ tests' core/testing/test_seed.h)
# Bazel reads the XML instead of inventing one case for the whole script.
_zs_cases=()
_zs_failed=0
_zs_suite=${TEST_TARGET:-shell_test}

test_seed() {
  case "${ZS_TEST_SEED:-}" in
    "") echo $(( $(printf '%s' "$1" | cksum | cut -d' ' -f1) % 2147483647 + 1 )) ;;
    random) echo $(( RANDOM * 32768 + RANDOM + 1 )) ;;
    *) echo "$ZS_TEST_SEED" ;;
  esac
}

_zs_xml_escape() {
  local s=$1
  s=${s//&/&amp;}; s=${s//</&lt;}; s=${s//>/&gt;}; s=${s//\"/&quot;}
  printf '%s' "$s"
}

record_case() {
  local name=$1 passed=$2 message=${3:-}
  if [ "$passed" = 1 ]; then
    echo "ok   $name"
    _zs_cases+=("<testcase classname=\"$(_zs_xml_escape "$_zs_suite")\" name=\"$(_zs_xml_escape "$name")\" time=\"0\"/>")
  else
    echo "FAIL $name"
    [ -n "$message" ] && echo "$message"
    _zs_failed=$((_zs_failed + 1))
    _zs_cases+=("<testcase classname=\"$(_zs_xml_escape "$_zs_suite")\" name=\"$(_zs_xml_escape "$name")\" time=\"0\"><failure message=\"$(_zs_xml_escape "${message:0:2000}")\"/></testcase>")
  fi
}

skip_case() {
  local name=$1 reason=$2
  echo "skip $name: $reason"
  _zs_cases+=("<testcase classname=\"$(_zs_xml_escape "$_zs_suite")\" name=\"$(_zs_xml_escape "$name")\" time=\"0\"><skipped message=\"$(_zs_xml_escape "$reason")\"/></testcase>")
}

expect() {  # expect NAME WANT_RC WANT_SUBSTRING -- command...
  local name=$1 want_rc=$2 want=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want_rc" ] || [[ "$out" != *"$want"* ]]; then
    record_case "$name" 0 "rc=$rc (want $want_rc); wanted substring: $want; output: $out"
  else
    record_case "$name" 1
  fi
}

finish_cases() {
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    {
      echo '<?xml version="1.0" encoding="UTF-8"?>'
      echo "<testsuites><testsuite name=\"$(_zs_xml_escape "$_zs_suite")\" tests=\"${#_zs_cases[@]}\" failures=\"$_zs_failed\">"
      printf '%s\n' "${_zs_cases[@]}"
      echo '</testsuite></testsuites>'
    } >"$XML_OUTPUT_FILE"
  fi
  [ "$_zs_failed" = 0 ]
  exit $?
}
