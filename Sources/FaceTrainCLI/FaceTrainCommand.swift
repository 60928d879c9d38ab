import FaceTrain
import Foundation

/// Exit codes as in swift-argument-parser: success, failure, usage error (EX_USAGE).
enum ExitCode: Int32 { case success = 0, failure = 1, refused = 2, usage = 64 }

@main
struct FaceTrainCommand {
    static func main() {
        BLASRuntime.selectKernel()
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "--version" {
            print("facetrain \(FaceTrainVersion.string)")
            print("BLAS: \(BLASRuntime.summary)")
            exit(ExitCode.success.rawValue)
        }
        print("facetrain \(FaceTrainVersion.string)")
        exit(ExitCode.success.rawValue)
    }
}
