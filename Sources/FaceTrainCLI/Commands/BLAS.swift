import FaceTrain
import FaceTrainEngine
import Foundation

/// `facetrain blas`: the CPU, the OpenBLAS kernel this process runs, and which core types this
/// CPU can execute. `make test` asks it which kernel the product runs and which the kernel matrix
/// may try; it never runs a kernel to find out whether the CPU can (that would be a SIGILL).
struct BLAS: Command {
    static let name = "blas"
    static let abstract = "Show the CPU, the OpenBLAS kernel facetrain runs, and the kernels this CPU can run."
    static var options: [OptionSpec] {
        [
            .flag("running", "Print only the name of the kernel this process runs."),
            .option("check", "core-type", "Exit 0 if this CPU can run the core type, else 1 with the missing flags."),
        ]
    }
    let runningOnly: Bool
    let check: String?

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        runningOnly = arguments.flag("running")
        check = arguments.string("check")
        if let check, check.isEmpty { throw UsageError(message: "--check needs a core type, e.g. SkylakeX") }
        if runningOnly && check != nil { throw UsageError(message: "--running and --check are alternatives") }
    }

    func run() throws -> ExitCode {
        let flags = TestHooks.cpuFlags ?? BLASRuntime.cpuFlags()
        if runningOnly {
            print(BLASRuntime.kernel)
            return .success
        }
        if let check {
            guard BLASRuntime.knownCoreType(check) != nil else {
                printError("\(check): not an x86-64 core type OpenBLAS knows (it would ignore the name)")
                return .failure
            }
            let missing = BLASRuntime.missingFlags(coreType: check, cpuFlags: flags)
            guard missing.isEmpty else {
                printError("\(check): this CPU lacks \(missing.joined(separator: ", "))")
                return .failure
            }
            print("\(check): this CPU can run it")
            return .success
        }
        let environment = ProcessInfo.processInfo.environment
        let userSet =
            environment["FACETRAIN_BLAS_REEXEC", default: ""].isEmpty
            && !environment["OPENBLAS_CORETYPE", default: ""].isEmpty
        print("CPU: \(BLASRuntime.cpuModel())")
        print("BLAS: \(BLASRuntime.summary)")
        print(
            "Kernel chosen by: "
                + (userSet
                    ? "OPENBLAS_CORETYPE in the environment"
                    : environment["FACETRAIN_BLAS_REEXEC"].map {
                        $0 == "rejected" ? "OpenBLAS (facetrain's choice failed its self-check)" : "facetrain (\($0))"
                    } ?? "OpenBLAS"))
        print("Engine kernels: \(VectorKernels.name), chosen by \(VectorKernels.choice)")
        for coreType in BLASRuntime.matrixCoreTypes {
            let missing = BLASRuntime.missingFlags(coreType: coreType, cpuFlags: flags)
            let verdict = missing.isEmpty ? "runs here" : "needs \(missing.joined(separator: ", "))"
            print("  " + coreType.padding(toLength: 12, withPad: " ", startingAt: 0) + verdict)
        }
        return .success
    }
}
