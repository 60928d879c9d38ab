#!/usr/bin/env bash
# `make test`: the whole suite on the OpenBLAS kernel the facetrain binary runs on this CPU, schemathesis
# against the server's OpenAPI document, the fuzz smoke run, the engine's suites again with Swift's runtime checks, and the kernel matrix: the
# numerically sensitive suites once more on each other OpenBLAS core type this CPU can execute, and
# on each of the engine's own vector kernel sets below the one this CPU runs (AVX2, portable Swift).
# Not a build script: `make test` builds the tests first. It never changes the caller's
# environment beyond this process, and a user's OPENBLAS_CORETYPE (or OPENBLAS_L2_SIZE) wins.
set -euo pipefail
cd "$(dirname "$0")/../.."
SWIFT=${SWIFT:-swift}
BIN=.build/release/facetrain

# The suites that run a second time with Swift's runtime checks (-O instead of -Ounchecked: the
# Makefile sets FACETRAIN_UNCHECKED=1 for everything else).
CHECKED_TESTS='FaceTrainTests\.(KernelTests|WinogradTests|LayerTests|LossTests|NetworkTests|TrainingTests|PretrainingLossTests|ImageResizeTests|FitJobTests|FeaturePyramidTests|DetectionLossTests|DetectionAssignmentTests|DetectorPipelineTests|FaceAlignmentTests)'
# The suites whose results depend on floating-point arithmetic: they run once per kernel.
SENSITIVE_TESTS='FaceTrainTests\.(BLASRuntimeTests|KernelTests|WinogradTests|DirectConvolutionTests|LayerTests|LossTests|NetworkTests|BranchingTests|TrainingTests|PretrainingLossTests|FitJobTests|ExportConsumerTests|FeaturePyramidTests|DetectionLossTests|DetectorPipelineTests)|FaceTrainCLITests\.(ExportAndPredictTests|GoldenBundleTests)'

# The kernel the product runs: the binary chooses it (re-executing itself) unless the user set one;
# a user's kernel this CPU cannot execute is refused here, with the kernels it can.
kernel=$("$BIN" blas --running)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  user_kernel=$OPENBLAS_CORETYPE
  echo "Tests run OpenBLAS's $kernel kernel: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE from the environment (CPU: $cpu)."
else
  user_kernel=
  export OPENBLAS_CORETYPE=$kernel
  echo "Tests run OpenBLAS's $kernel kernel: the one facetrain chooses on this CPU ($cpu)."
fi

summary=()
started=$SECONDS
"$SWIFT" test -c release --skip-build
summary+=("$kernel: whole suite passed ($((SECONDS - started)) s)")

# The API against its OpenAPI document: schemathesis on a live server, about a minute and a half.
started=$SECONDS
bash Tests/Scripts/schemathesis_serve.sh
summary+=("schemathesis: no 5xx and no answer off its schema ($((SECONDS - started)) s)")

make --no-print-directory fuzz-smoke

started=$SECONDS
env -u FACETRAIN_UNCHECKED "$SWIFT" build -c release --build-tests -Xswiftc -enable-testing --build-path .build/checked
env -u FACETRAIN_UNCHECKED "$SWIFT" test -c release --skip-build --build-path .build/checked --filter "$CHECKED_TESTS"
summary+=("$kernel: checked build's engine suites passed ($((SECONDS - started)) s with the build)")

# The kernel matrix, slowest kernel first. A core type is tried only after the binary says the CPU
# has every instruction it needs (`facetrain blas --check`): it is never attempted to find out.
order=(Prescott Haswell SkylakeX Cooperlake)
rank() { local i; for i in "${!order[@]}"; do [ "${order[$i],,}" = "${1,,}" ] && { echo "$i"; return; }; done; echo 99; }
failed=0
for core in "${order[@]}"; do
  if ! reason=$("$BIN" blas --check "$core" 2>&1); then
    summary+=("$core: skipped, ${reason#*: }")
  elif [ "${core,,}" = "${kernel,,}" ]; then
    summary+=("$core: ran above (the whole suite)")
  elif [ -n "$user_kernel" ] && [ "$(rank "$core")" -gt "$(rank "$user_kernel")" ]; then
    summary+=("$core: skipped, above OPENBLAS_CORETYPE=$user_kernel set by the environment")
  elif [ "$(OPENBLAS_CORETYPE=$core "$BIN" blas --running)" != "$core" ]; then
    summary+=("$core: skipped, this OpenBLAS does not offer it")
  else
    echo "Kernel matrix: the numerically sensitive suites on OpenBLAS's $core kernel"
    started=$SECONDS
    if OPENBLAS_CORETYPE=$core "$SWIFT" test -c release --skip-build --filter "$SENSITIVE_TESTS"; then
      summary+=("$core: sensitive suites passed ($((SECONDS - started)) s)")
    else
      summary+=("$core: sensitive suites FAILED ($((SECONDS - started)) s)")
      failed=1
    fi
  fi
done

# The engine's vector kernels (VectorKernels): the suites ran above on the best set this CPU has;
# each set below it runs the sensitive suites once, on the product's OpenBLAS kernel.
flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
has() { case " $flags " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
vector_sets=()
if has avx512f && has avx512vl && has avx512dq && has avx2 && has fma; then
  vector_sets=(avx2 portable)
elif has avx2 && has fma; then
  vector_sets=(portable)
fi
for set in "${vector_sets[@]}"; do
  echo "Vector kernel matrix: the numerically sensitive suites on the engine's $set kernels"
  started=$SECONDS
  if FACETRAIN_VECTOR_KERNELS=$set "$SWIFT" test -c release --skip-build --filter "$SENSITIVE_TESTS"; then
    summary+=("engine's $set kernels: sensitive suites passed ($((SECONDS - started)) s)")
  else
    summary+=("engine's $set kernels: sensitive suites FAILED ($((SECONDS - started)) s)")
    failed=1
  fi
done

echo "OpenBLAS kernels on $cpu:"
printf '  %s\n' "${summary[@]}"
exit $failed
