import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The OpenBLAS kernel choice: which core type each CPU gets, which a CPU cannot run, and that this
/// test process runs the kernel `make test` asked for. The re-executing binary is tested in
/// FaceTrainCLITests/CommandLineTests.
@Suite struct BLASRuntimeTests {
    /// Flags of a Sapphire Rapids Xeon (AVX-512 with BF16, VNNI and AMX), which OpenBLAS 0.3.21
    /// does not know: it runs Prescott there.
    static let xeonFlags = Set(
        ("fpu sse sse2 pni ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt avx f16c avx2 bmi1 bmi2 avx512f avx512dq "
            + "avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 avx512_vnni amx_bf16 "
            + "amx_tile amx_int8").split(separator: " ").map(String.init))
    /// An AVX2-only AMD EPYC (Zen 3): OpenBLAS runs its Zen kernel there.
    static let zen3Flags = Set(
        "fpu sse sse2 pni ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt avx f16c avx2 bmi1 bmi2 sse4a".split(
            separator: " "
        ).map(String.init))
    /// A CPU without AVX (a Westmere Xeon).
    static let oldFlags = Set("fpu sse sse2 pni ssse3 cx16 sse4_1 sse4_2 popcnt".split(separator: " ").map(String.init))

    @Test func eachCPUGetsTheFastestKernelItCanRun() {
        let unset: [String: String] = [:]
        #expect(
            BLASRuntime.coreTypeToSelect(environment: unset, cpuFlags: Self.xeonFlags, runningKernel: "Prescott")
                == "SkylakeX")
        #expect(
            BLASRuntime.coreTypeToSelect(environment: unset, cpuFlags: Self.zen3Flags, runningKernel: "Zen")
                == "Haswell")
        #expect(
            BLASRuntime.coreTypeToSelect(environment: unset, cpuFlags: Self.oldFlags, runningKernel: "Nehalem")
                == nil)
        // Already the best, or Cooperlake (SkylakeX's single-precision kernels) where the CPU has BF16.
        #expect(
            BLASRuntime.coreTypeToSelect(environment: unset, cpuFlags: Self.xeonFlags, runningKernel: "SkylakeX")
                == nil)
        #expect(
            BLASRuntime.coreTypeToSelect(environment: unset, cpuFlags: Self.xeonFlags, runningKernel: "Cooperlake")
                == nil)
        var noBF16 = Self.xeonFlags
        noBF16.remove("avx512_bf16")
        #expect(
            BLASRuntime.coreTypeToSelect(environment: unset, cpuFlags: noBF16, runningKernel: "Cooperlake")
                == "SkylakeX")
        // An AVX-512 kernel on a CPU that has only AVX2 is corrected.
        #expect(
            BLASRuntime.coreTypeToSelect(environment: unset, cpuFlags: Self.zen3Flags, runningKernel: "SkylakeX")
                == "Haswell")
    }

    @Test func theUsersKernelAndAReexecutedProcessAreLeftAlone() {
        for environment in [["OPENBLAS_CORETYPE": "Prescott"], ["FACETRAIN_BLAS_REEXEC": "SkylakeX"]] {
            #expect(
                BLASRuntime.coreTypeToSelect(
                    environment: environment, cpuFlags: Self.xeonFlags, runningKernel: "Prescott") == nil)
        }
    }

    @Test func aKernelTheCPUCannotRunIsRefusedNamingTheVariableAndTheAlternatives() throws {
        #expect(
            BLASRuntime.missingFlags(coreType: "skylakex", cpuFlags: Self.zen3Flags)
                == ["avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"])
        #expect(BLASRuntime.missingFlags(coreType: "Cooperlake", cpuFlags: Self.xeonFlags).isEmpty)
        #expect(BLASRuntime.missingFlags(coreType: "Haswell", cpuFlags: Self.oldFlags) == ["avx", "avx2", "fma"])
        #expect(BLASRuntime.missingFlags(coreType: "Excavator", cpuFlags: Self.xeonFlags) == ["fma4"])
        // A name OpenBLAS does not know is ignored by it (it detects the CPU), so nothing is missing.
        #expect(BLASRuntime.missingFlags(coreType: "SapphireRapids", cpuFlags: Self.oldFlags).isEmpty)

        let message = try #require(
            BLASRuntime.unrunnableCoreTypeMessage(
                environment: ["OPENBLAS_CORETYPE": "SkylakeX"], cpuFlags: Self.zen3Flags))
        #expect(message.contains("OPENBLAS_CORETYPE=SkylakeX"))
        #expect(message.contains("avx512f"))
        #expect(message.contains("illegal instruction"))
        #expect(message.contains("Prescott, Haswell, Zen"))
        #expect(!message.contains("Cooperlake"))
        #expect(
            BLASRuntime.unrunnableCoreTypeMessage(
                environment: ["OPENBLAS_CORETYPE": "Haswell"], cpuFlags: Self.zen3Flags)
                == nil)
        #expect(BLASRuntime.unrunnableCoreTypeMessage(environment: [:], cpuFlags: Self.oldFlags) == nil)
        #expect(BLASRuntime.runnableMatrixCoreTypes(cpuFlags: Self.oldFlags) == ["Prescott"])
        #expect(BLASRuntime.runnableMatrixCoreTypes(cpuFlags: Self.xeonFlags) == BLASRuntime.matrixCoreTypes)
    }

    /// `make test` exports the kernel it means to test: this process must be running it. Run
    /// otherwise (`swift test`), it must at least run a kernel the binary would keep.
    @Test func thisProcessRunsTheKernelTheProductRuns() {
        let requested = ProcessInfo.processInfo.environment["OPENBLAS_CORETYPE", default: ""]
        if let known = BLASRuntime.knownCoreType(requested) {
            #expect(BLASRuntime.kernel.lowercased() == known.lowercased(), "\(BLASRuntime.summary)")
        } else {
            let better = BLASRuntime.coreTypeToSelect(
                environment: [:], cpuFlags: BLASRuntime.cpuFlags(), runningKernel: BLASRuntime.kernel)
            #expect(
                better == nil,
                "this process runs \(BLASRuntime.kernel), the facetrain binary \(better ?? ""): run `make test`")
        }
        #expect(BLASRuntime.selfCheck() < 1e-5, "\(BLASRuntime.summary)")
    }
}
