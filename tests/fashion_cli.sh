# The start that the CLI scripts on a Fashion-MNIST slice share (sourced,
# with $NAME set to the script's name and $TRAIN, $TEST the slice's sizes):
# $BUILD, $cuttle, $python; $tmp, a temporary directory removed on exit
# (kept with KEEP=1); $tmp/data, the first $TRAIN training and $TEST test
# images (tests/fashion_slice.py), or a FAIL line and exit 1 without the
# dataset; result NAME STATUS FILE..., which prints PASS or FAIL (then the
# files, indented, on stderr).
BUILD=${BUILD:-build}
cuttle="$BUILD/cuttle"
python=/usr/bin/python3
fashion=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
[ -n "$KEEP" ] || trap 'rm -rf "$tmp"' EXIT

. tests/result.sh

if [ ! -f "$fashion/train-images-idx3-ubyte.gz" ]; then
    echo "FAIL ${NAME}_needs_fashion_mnist ($fashion: apt-get install dataset-fashion-mnist)"
    exit 1
fi
mkdir -p "$tmp/data"
"$python" tests/fashion_slice.py "$fashion" "$tmp/data" "$TRAIN" "$TEST"
