#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/Targets and their seed corpora (see Fuzz/README.md).
#
#   Fuzz/build.sh           the FaceTrain libraries (engine, application, server) built by SwiftPM with coverage instrumentation,
#                           AddressSanitizer and Swift's checks, in its own folder (.build/fuzz)
#   Fuzz/build.sh --smoke   no library build: the targets linked against the objects `make test`
#                           built (.build/release, -enable-testing), into .build/fuzz-smoke
#
# Each target is one Swift file linked against the library's objects, with libFuzzer's main.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES="openblas lapacke hdf5 libturbojpeg libpng libcrypto libmicrohttpd"
if [ "${1:-}" = "--smoke" ]; then
    BUILD=.build/fuzz-smoke
    PRODUCTS=.build/release
    SANITIZERS=fuzzer
    [ -f "$PRODUCTS/Modules/FaceTrain.swiftmodule" ] || {
        echo "no $PRODUCTS/FaceTrain: run swift build -c release --build-tests -Xswiftc -enable-testing first" >&2
        exit 1
    }
else
BUILD=.build/fuzz
PRODUCTS=$BUILD/release
SANITIZERS=fuzzer,address
# Without FACETRAIN_UNCHECKED, Swift's bounds and overflow checks stay (-O, not -Ounchecked): an index or size
# computed from a hostile file then traps instead of going unnoticed. -enable-testing exports the
# internal readers (UserMetadataReader) to the metadata target.
for target in FaceTrainServer FaceTrainSynthesis; do
    env -u FACETRAIN_UNCHECKED swift build -c release --target "$target" --build-path "$BUILD" \
        -Xswiftc -sanitize="$SANITIZERS" -Xswiftc -enable-testing
done
fi
OUT=$BUILD/targets
# Importing FaceTrain needs the C modules it was built against: module maps and header paths.
IMPORTS=(-I "$PRODUCTS/Modules" -Xcc -fmodule-map-file="$PRODUCTS/CBaseModel.build/module.modulemap"
         -Xcc -I -Xcc Sources/CBaseModel/include
         -Xcc -fmodule-map-file="$PRODUCTS/CDetectorModel.build/module.modulemap"
         -Xcc -I -Xcc Sources/CDetectorModel/include
         -Xcc -fmodule-map-file="$PRODUCTS/CVectorKernels.build/module.modulemap"
         -Xcc -I -Xcc Sources/CVectorKernels/include)
for module in Sources/C*/module.modulemap; do IMPORTS+=(-Xcc -fmodule-map-file="$module"); done
for flag in $(pkg-config --cflags $PACKAGES); do IMPORTS+=(-Xcc "$flag"); done
# The objects of the library targets whose source still exists: a build folder keeps the object of a
# source file that was deleted or renamed, and linking it would bring back its old symbols.
LIBRARY_OBJECTS=("$PRODUCTS"/CBaseModel.build/*.o "$PRODUCTS"/CDetectorModel.build/*.o "$PRODUCTS"/CVectorKernels.build/*.o)
for target in FaceTrainEngine FaceTrain FaceTrainServer FaceTrainSynthesis; do
    for object in "$PRODUCTS/$target.build"/*.swift.o; do
        source=$(basename "$object" .o)
        [ -n "$(find "Sources/$target" -name "$source" -print -quit)" ] && LIBRARY_OBJECTS+=("$object")
    done
done
# shellcheck disable=SC2046  # pkg-config prints several flags
LINK=($(pkg-config --libs $PACKAGES) -lstdc++)

link() {  # link OUTPUT SOURCE [extra flags...]
    local output=$1 source=$2
    shift 2
    # ld.gold lists every ASan symbol it cannot export; that noise hides real errors.
    swiftc -O "${IMPORTS[@]}" "$source" "${LIBRARY_OBJECTS[@]}" "${LINK[@]}" "$@" \
        -module-name "FuzzTarget_$(basename "$source" .swift)" -o "$output" 2>&1 \
        | { grep -v "Cannot export local symbol" || true; }
    test -x "$output"
}

mkdir -p "$OUT"
for source in Fuzz/Targets/*.swift; do
    name=$(basename "$source" .swift)
    echo "linking $OUT/$name"
    rm -f "$OUT/$name"
    link "$OUT/$name" "$source" -parse-as-library -sanitize="$SANITIZERS"
done

# The seed writer has its own main: it links AddressSanitizer and libFuzzer's runtime without libFuzzer's main.
echo "writing seeds into $BUILD/seeds"
rm -f "$OUT/seeds"
NO_MAIN=$(ls "$(dirname "$(command -v swiftc)")"/../lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a | head -n 1)
link "$OUT/seeds" Fuzz/seeds.swift -sanitize=address -Xlinker "$NO_MAIN"
rm -rf "$BUILD/seeds"
# Globals of top-level code live until exit, which LeakSanitizer would report.
ASAN_OPTIONS=detect_leaks=0 "$OUT/seeds" "$BUILD/seeds"
mkdir -p "$BUILD/seeds/manifest"
for manifest in Tests/Fixtures/*/models/*/manifest.json Tests/Fixtures/*/*/manifest.json; do
    [ -f "$manifest" ] && cp "$manifest" "$BUILD/seeds/manifest/$(echo "$manifest" | tr / _)"
done
ls "$BUILD/seeds"/*
