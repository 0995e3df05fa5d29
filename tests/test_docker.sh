#!/bin/sh
# docker/Dockerfile and docker/Dockerfile.cuda cannot be built here (no
# registry to pull the base images from), so this checks what they stand
# on: every script they run exists and is executable, every make target
# they name exists (make -n), and their build steps are the README's two
# commands, which CI runs, so what CI proves is what the images do.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/result.sh

for file in docker/Dockerfile docker/Dockerfile.cuda; do
    name=$(basename "$file" | tr . _)
    : > "$tmp/why"
    [ -f "$file" ] || echo "$file is missing" >> "$tmp/why"
    grep -q '^FROM ' "$file" 2>/dev/null || echo "$file has no FROM" >> "$tmp/why"
    for script in $(grep -o 'scripts/[A-Za-z0-9_.-]*' "$file" 2>/dev/null | sort -u); do
        [ -x "$script" ] || echo "$file runs $script, which is not an executable file" >> "$tmp/why"
    done
    # the words after "make" on its instructions (not comments) that are targets
    for target in $(grep -v '^[[:space:]]*#' "$file" 2>/dev/null | awk '{
            for (i = 1; i <= NF; i++) if ($i == "make")
                for (j = i + 1; j <= NF && $j != "&&" && $j != ";" && $j != "\\"; j++)
                    { word = $j; sub(/;$/, "", word); if (word ~ /^[a-z][a-z-]*$/) print word }
        }' | sort -u); do
        # as the image runs it: not with the BUILD that `make test` exports
        env -u BUILD -u MAKEFLAGS -u MAKELEVEL make -n --no-print-directory "$target" \
            PREFIX="$tmp/prefix" > /dev/null 2>&1 ||
            echo "$file: make has no target $target" >> "$tmp/why"
    done
    [ -s "$tmp/why" ]
    result "${name}_runs_what_exists" $(( ! $? )) "$tmp/why"
done

# The README's first command's setup and build; its second's checks.
setup=$(grep -o '^scripts/setup-debian.sh && make -j' README.md | head -n 1)
check=$(grep -o '^scripts/setup-debian.sh --torch && scripts/setup-onnxruntime.sh && make -j check' \
    README.md | head -n 1)
{ [ -n "$setup" ] || echo "README: the first command is not 'scripts/setup-debian.sh && make -j ...'"
  [ -n "$check" ] || echo "README: the second command is not the setup and make check"
  grep -q 'scripts/setup-debian.sh && \\$' docker/Dockerfile ||
      echo "docker/Dockerfile does not start with scripts/setup-debian.sh"
  grep -q 'make -j"$(nproc)" && \\$' docker/Dockerfile || echo "docker/Dockerfile: no make -j"
  grep -q 'scripts/setup-debian.sh --torch && scripts/setup-onnxruntime.sh && \\$' docker/Dockerfile ||
      echo "docker/Dockerfile CHECK=1 does not run the README's second command"
  grep -q 'make -j"$(nproc)" check' docker/Dockerfile || echo "docker/Dockerfile: no make check"
  grep -q 'scripts/setup-debian.sh && \\$' docker/Dockerfile.cuda ||
      echo "docker/Dockerfile.cuda does not run scripts/setup-debian.sh"
  grep -q '^scripts/setup-debian.sh --torch$' .ci/run || echo ".ci/run does not run setup --torch"
} > "$tmp/why"
[ -s "$tmp/why" ]
result docker_builds_as_the_readme_and_ci $(( ! $? )) "$tmp/why"
