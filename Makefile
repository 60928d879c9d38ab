# Everyday commands. Each target is one line you could type yourself.
SWIFT    ?= swift
CONFIG   ?= release
DATA     ?= datasets/demo
MODELS   ?= models
BIN      := .build/$(CONFIG)/facetrain

# pkg-config name : Debian package that provides it
PKGS := openblas:libopenblas-dev lapacke:liblapacke-dev hdf5:libhdf5-dev \
        libturbojpeg:libturbojpeg0-dev libpng:libpng-dev libcrypto:libssl-dev \
        libmicrohttpd:libmicrohttpd-dev
# command : Debian package (tools the tests call)
TOOLS := pkg-config:pkg-config h5dump:hdf5-tools python3:python3 sha256sum:coreutils curl:curl \
         openssl:openssl chromium:chromium

SHARED   ?= ../shared
# The binary and the tests are built without Swift's runtime checks (Package.swift says why);
# `make test` builds the engine's suites once more with them, and so does the fuzz build.
export FACETRAIN_UNCHECKED := 1
BASE     := base/builtin
DETECTOR := detector/builtin
# The recipe of the builtin base (its manifest records it too).
BASE_ARGS := --architecture ref-deep-gdc --epochs 15 --width 32 --input-size 80 --seed 1 --name celeba-ref-deep-gdc-32-80-grey10-area50-centre90 --version 9 \
             --teacher $(SHARED)/datasets/celeba_identities/dlib_descriptors.h5 --teacher-loss feature \
             --teacher-weight 20 --greyscale 0.1 --min-area 0.5 --centre-crop 0.9
# The recipe of the builtin detector (its manifest records it too), in five stages:
# 1. faces_in_photos plus DETECTOR_SCENES synthetic scenes from random weights (v2 of detector/README.md);
# 2. a finetune from stage 1 with DETECTOR_CROP_SCENES crop scenes added (detector/training_set.sh, v3);
# 3. a finetune from stage 2 on the same set with faces partly covered and more blur (v4);
# 4. 100 more epochs of stage 3's recipe (v5): the detector was still learning;
# 5. a finetune from stage 4 with DETECTOR_MORE_SCENES synthetic scenes instead (v6): drawn faces
#    like the demo's pass the face check.
DETECTOR_SCENES := 250
DETECTOR_CROP_SCENES := 800
DETECTOR_MORE_SCENES := 750
DETECTOR_ARGS := --epochs 140 --input-size 320 --batch-size 32 --learning-rate 0.02 --hold-out 0.1 \
                 --landmark-weight 0.5 --measure-every 10 --seed 1 --name facetrain-detector --version 2
DETECTOR_FINETUNE_ARGS := --epochs 40 --input-size 320 --batch-size 32 --learning-rate 0.005 --hold-out 0.1 \
                 --landmark-weight 0.5 --measure-every 10 --seed 1 --name facetrain-detector --version 3
DETECTOR_OCCLUSION_ARGS := --epochs 60 --input-size 320 --batch-size 32 --learning-rate 0.01 --hold-out 0.1 \
                 --landmark-weight 0.5 --measure-every 10 --seed 1 --occlusion 0.3 --blur 0.3 \
                 --name facetrain-detector --version 4
DETECTOR_LONGER_ARGS := --epochs 100 --input-size 320 --batch-size 32 --learning-rate 0.01 --hold-out 0.1 \
                 --landmark-weight 0.5 --measure-every 20 --seed 2 --occlusion 0.3 --blur 0.3 \
                 --name facetrain-detector --version 5
DETECTOR_DRAWN_ARGS := --epochs 40 --input-size 320 --batch-size 32 --learning-rate 0.005 --hold-out 0.1 \
                 --landmark-weight 0.5 --measure-every 20 --seed 5 --occlusion 0.3 --blur 0.3 \
                 --name facetrain-detector --version 6

.PHONY: all deps pydeps openapi build release demo serve admin-screenshot test fuzz fuzz-smoke detector quality-face-check bench bench-detect bench-enrollment bench-inference bench-serve quality base lint format clean

all: build

# Installs the Debian packages whose pkg-config check (or tool) is missing; needs root then.
deps:
	@missing=""; \
	for pair in $(TOOLS); do command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	for pair in $(PKGS); do pkg-config --exists $${pair%%:*} 2>/dev/null || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -ne 0 ]; then echo "Missing:$$missing. Run as root, or: sudo apt-get install -y$$missing" >&2; exit 1; fi; \
	  echo "Installing:$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

# Python modules the tests use as independent consumers of the exports (onnxruntime, coremltools)
# and of the API's OpenAPI document (schemathesis).
pydeps:
	@python3 -c "import numpy, onnx, onnxruntime, coremltools, PIL, schemathesis" 2>/dev/null || python3 -m pip install -q -r Tests/Scripts/requirements.txt

# Rewrites docs/openapi.json from its one source, Sources/FaceTrainServer/OpenAPIDocument.swift.
openapi:
	$(SWIFT) build -c release --build-tests -Xswiftc -enable-testing
	FACETRAIN_WRITE_OPENAPI=1 $(SWIFT) test -c release --skip-build --filter OpenAPIDocumentTests

build: deps
	$(SWIFT) build -c $(CONFIG)

release: deps
	$(SWIFT) build -c release

# Synthesises the demo faces (once), checks them, trains and evaluates a model, verifies the bundle.
demo: release
	@[ -f $(DATA)/users.json ] || .build/release/facetrain synth --out $(DATA) --users 20 --per-user 25 --seed 1
	.build/release/facetrain data check --data $(DATA)
	.build/release/facetrain fit --data $(DATA) --out $(MODELS) | tee .build/demo-fit.log
	.build/release/facetrain eval --model "$$(tail -n 1 .build/demo-fit.log)" --report $(MODELS)/demo-report.html
	.build/release/facetrain verify "$$(tail -n 1 .build/demo-fit.log)"

# The app's API (facetrain serve) on the demo data, at http://127.0.0.1:8080; Ctrl-C stops.
serve: release
	@[ -f $(DATA)/users.json ] || .build/release/facetrain synth --out $(DATA) --users 20 --per-user 25 --seed 1
	.build/release/facetrain serve --data $(DATA) --models $(MODELS)

# The admin page (GET /) of a throwaway server on synthetic users, rendered by headless Chromium.
admin-screenshot: release
	SCREENSHOT=$(or $(SCREENSHOT),.build/admin.png) bash Tests/Scripts/admin_screenshot.sh

# The lint first, then the tests, optimised: training and gradient checks are what they exercise. Tests/Scripts/test.sh
# runs them on the OpenBLAS kernel the binary runs on this CPU, then the fuzz smoke run, the engine's
# suites again with Swift's checks on (-O, not -Ounchecked, in .build/checked: an out-of-bounds index
# traps instead of reading garbage), and the numerically sensitive suites on every other kernel this
# CPU can execute (Prescott, Haswell, SkylakeX, Cooperlake), printing which ran and which were skipped.
test: deps pydeps lint
	$(SWIFT) build -c release --build-tests -Xswiftc -enable-testing
	SWIFT=$(SWIFT) bash Tests/Scripts/test.sh

# The libFuzzer targets (Fuzz/README.md): the library built with coverage, ASan and Swift's checks in
# .build/fuzz, then each target for FUZZ_SECONDS, one after another.
FUZZ_TARGETS := image manifest metadata multipart routes
FUZZ_SECONDS ?= 900
fuzz: deps
	bash Fuzz/build.sh
	for target in $(FUZZ_TARGETS); do bash Fuzz/run.sh $$target $(FUZZ_SECONDS) || exit 1; done

# The same targets linked against the release objects `test` built, 5 s each over their seeds: they still
# build against the library, and no seed or quick mutation crashes (a smoke test, not a search).
fuzz-smoke:
	bash Fuzz/build.sh --smoke
	for target in $(FUZZ_TARGETS); do FUZZ_BUILD=.build/fuzz-smoke bash Fuzz/run.sh $$target 5 || exit 1; done

# Retrains the builtin base from ../shared (about 45 minutes on 2 idle cores) and compiles it in.
base: release
	rm -rf $(BASE).new
	.build/release/facetrain pretrain --data $(SHARED)/datasets/celeba_identities --out $(BASE).new $(BASE_ARGS)
	rm -rf $(BASE) && mv $(BASE).new $(BASE)
	touch Sources/CBaseModel/base_model.S
	$(SWIFT) build -c release

# Retrains the builtin face detector on ../shared's faces_in_photos (see detector/README.md for how
# long it takes) and compiles it in.
detector: release
	rm -rf $(DETECTOR).new .build/detector-stage-1 .build/detector-stage-2 .build/detector-stage-3 .build/detector-stage-4
	bash detector/training_set.sh $(SHARED) .build/faces_in_photos+synthetic $(DETECTOR_SCENES) 7 0
	.build/release/facetrain detector train --data .build/faces_in_photos+synthetic --out .build/detector-stage-1 $(DETECTOR_ARGS)
	bash detector/training_set.sh $(SHARED) .build/faces_in_photos+synthetic+crops $(DETECTOR_SCENES) 7 $(DETECTOR_CROP_SCENES)
	.build/release/facetrain detector train --data .build/faces_in_photos+synthetic+crops --out .build/detector-stage-2 \
	  --from .build/detector-stage-1 $(DETECTOR_FINETUNE_ARGS)
	.build/release/facetrain detector train --data .build/faces_in_photos+synthetic+crops --out .build/detector-stage-3 \
	  --from .build/detector-stage-2 $(DETECTOR_OCCLUSION_ARGS)
	.build/release/facetrain detector train --data .build/faces_in_photos+synthetic+crops --out .build/detector-stage-4 \
	  --from .build/detector-stage-3 $(DETECTOR_LONGER_ARGS)
	bash detector/training_set.sh $(SHARED) .build/faces_in_photos+synthetic750+crops $(DETECTOR_MORE_SCENES) 7 $(DETECTOR_CROP_SCENES)
	.build/release/facetrain detector train --data .build/faces_in_photos+synthetic750+crops --out $(DETECTOR).new \
	  --from .build/detector-stage-4 $(DETECTOR_DRAWN_ARGS)
	rm -rf $(DETECTOR) && mv $(DETECTOR).new $(DETECTOR)
	touch Sources/CDetectorModel/detector_model.S
	$(SWIFT) build -c release

# Wall time of fit from the base for 100 users (cold and warm embedding cache) and from scratch.
bench-enrollment: release
	bash Tests/Scripts/bench_enrollment.sh

# Inference against onnxruntime on the same network, side by side (issue #34).
bench-inference: release
	bash Tests/Scripts/bench_inference.sh

# GET /v1/model requests/s and p99 of a throwaway server on 127.0.0.1, idle and during a training (bounded).
bench-serve: release
	bash Tests/Scripts/bench_serve.sh

# The detector on faces_in_photos' dev photos: ms per photo and the scorer's figures, beside YuNet when
# Python's cv2 and YUNET_MODEL are there (Tests/Scripts/bench_detect.sh).
bench-detect: release
	SHARED=$(SHARED) bash Tests/Scripts/bench_detect.sh

quality: release
	bash datasets/quality.sh

# How often the face check refuses real face crops (orl, cs131, celeba protocols, demo users) and takes non-faces for faces.
quality-face-check: release
	bash Tests/Scripts/face_check_rates.sh

# facetrain's benchmark per architecture (ARCHITECTURES, WIDTH), next to PyTorch's on the same network when torch is importable.
bench: release
	bash Tests/Scripts/bench.sh

# The house style (.swift-format: 120 columns, 4 spaces); --strict makes every finding fail. `make test` runs it.
lint:
	$(SWIFT) format lint --strict --recursive Sources Tests Fuzz Package.swift

format:
	$(SWIFT) format --in-place --recursive Sources Tests Fuzz Package.swift

clean:
	$(SWIFT) package clean
