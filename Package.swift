// swift-tools-version: 6.0
import Foundation
import PackageDescription

/// FACETRAIN_UNCHECKED=1 (set by the Makefile for the binary it builds and tests) compiles the engine
/// and the application without Swift's bounds and overflow checks: 3-4 % more training steps a
/// second (ref-deep-gdc, width 32, 80 px: 172 against 166 img/s on an AMD EPYC). Without it the
/// package needs no unsafe flags, so an app can depend on the library; `make test` also runs the
/// engine's suites from such a checked build, where an out-of-bounds index traps.
let unchecked = ProcessInfo.processInfo.environment["FACETRAIN_UNCHECKED"] == "1"
let optimisation: [SwiftSetting] = unchecked ? [.unsafeFlags(["-Ounchecked"], .when(configuration: .release))] : []

let package = Package(
    name: "facetrain",
    products: [
        .library(name: "FaceTrain", targets: ["FaceTrain", "FaceTrainEngine"]),
        .executable(name: "facetrain", targets: ["FaceTrainCLI"]),
        // The app's client of `facetrain serve`: Foundation only, so an iOS app can add it alone.
        .library(name: "FaceTrainClient", targets: ["FaceTrainClient"]),
    ],
    targets: [
        // MARK: - C libraries, installed with apt (`make deps`) and found through pkg-config
        .systemLibrary(name: "CBLAS", pkgConfig: "openblas", providers: [.apt(["libopenblas-dev"])]),
        .systemLibrary(name: "CLAPACKE", pkgConfig: "lapacke", providers: [.apt(["liblapacke-dev"])]),
        .systemLibrary(name: "CHDF5", pkgConfig: "hdf5", providers: [.apt(["libhdf5-dev"])]),
        .systemLibrary(name: "CTurboJPEG", pkgConfig: "libturbojpeg", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),

        // The builtin base model, compiled in (`make base` retrains it); the assembler finds its files
        // through the header search path.
        .target(name: "CBaseModel", cSettings: [.headerSearchPath("../../base/builtin")]),
        // The builtin face detector, compiled in the same way (`make detector` retrains it).
        .target(name: "CDetectorModel", cSettings: [.headerSearchPath("../../detector/builtin")]),

        // The engine's kernels for instruction sets the Swift build cannot target (AVX-512), chosen at
        // run time (Sources/FaceTrainEngine/Kernels/VectorKernels.swift).
        .target(name: "CVectorKernels"),

        // MARK: - Libraries, each depending only on those above it (the compiler enforces the order)

        // The engine: tensors, kernels (the only BLAS/LAPACK callers), layers, model definitions,
        // the network. No knowledge of files, bundles, exports or HTTP.
        .target(
            name: "FaceTrainEngine", dependencies: ["CBLAS", "CLAPACKE", "CVectorKernels"], swiftSettings: optimisation),

        // The application: images, data folders, training, evaluation, pretraining, bundles, exports.
        .target(
            name: "FaceTrain",
            dependencies: [
                "FaceTrainEngine", "CHDF5", "CTurboJPEG", "CPNG", "CCrypto", "CBaseModel", "CDetectorModel",
            ],
            swiftSettings: optimisation
        ),

        // Synthetic faces for the demo and the tests (the engine's random numbers, FaceTrain's JPEG writer).
        .target(name: "FaceTrainSynthesis", dependencies: ["FaceTrainEngine", "FaceTrain"]),

        // `bench` and `architectures`: training speed and FLOP counts.
        .target(name: "FaceTrainBenchmark", dependencies: ["FaceTrain"]),

        // `serve`: the HTTP backend the app talks to.
        .target(name: "FaceTrainServer", dependencies: ["FaceTrain", "CMicroHTTPD"]),

        // The app's typed client of `serve` (URLSession). It depends on nothing here: the server's
        // OpenAPI document and the client tests against a live server keep the two in step.
        .target(name: "FaceTrainClient"),

        // MARK: - Command-line tool: parses arguments and calls the libraries
        .executableTarget(
            name: "FaceTrainCLI",
            dependencies: [
                "FaceTrain", "FaceTrainEngine", "FaceTrainSynthesis", "FaceTrainBenchmark", "FaceTrainServer",
            ]
        ),

        // MARK: - Tests
        .target(
            name: "FaceTrainTestSupport", dependencies: ["FaceTrain", "FaceTrainEngine"],
            path: "Tests/FaceTrainTestSupport"),
        .testTarget(
            name: "FaceTrainTests",
            dependencies: [
                "FaceTrain", "FaceTrainEngine", "FaceTrainSynthesis", "FaceTrainBenchmark", "FaceTrainServer",
                "FaceTrainTestSupport", "CTurboJPEG", "CPNG",
            ]
        ),
        .testTarget(
            name: "FaceTrainCLITests",
            dependencies: [
                "FaceTrainCLI", "FaceTrain", "FaceTrainEngine", "FaceTrainSynthesis", "FaceTrainServer",
                "FaceTrainTestSupport", "FaceTrainClient",
            ]
        ),
    ]
)
