# Sourced by test scripts (". tests/result.sh"): one PASS or FAIL line, and
# on failure the files that show why, indented, on stderr.
result() { # name, status, files to show on failure
    name=$1
    status=$2
    shift 2
    if [ "$status" -eq 0 ]; then
        echo "PASS $name"
    else
        echo "FAIL $name"
        for file in "$@"; do sed 's/^/    /' "$file" >&2; done
    fi
}
