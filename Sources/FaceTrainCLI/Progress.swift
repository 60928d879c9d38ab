import FaceTrain
import FaceTrainEngine
import Foundation
import Synchronization

/// Prints fit progress: a live bar on a terminal, summary lines otherwise, JSON lines with `--json`.
final class ProgressPrinter: FitJobObserver {
    enum Style { case terminal, lines, json }
    let style: Style
    private var lastDraw = Date.distantPast
    var epochs = 0
    private var epochStart = Date()

    init(json: Bool) {
        style = json ? .json : (isatty(STDOUT_FILENO) != 0 ? .terminal : .lines)
    }

    /// One JSON object per line, keys sorted.
    func event(_ name: String, _ fields: [String: Any]) {
        var object = fields
        object["event"] = name
        if let data = try? JSONSerialization.data(
            withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        {
            print(String(decoding: data, as: UTF8.self))
            fflush(nil)
        }
    }

    /// A line for people; in JSON mode an event of kind "message".
    func say(_ text: String) {
        if style == .json { event("message", ["text": text]) } else { print(text) }
        fflush(nil)
    }

    func dataLoaded(users: Int, crops: Int, warnings: [DataWarning]) {
        for warning in warnings {
            if style == .json {
                event("warning", ["kind": warning.kind, "path": warning.path, "message": warning.message])
            } else {
                printError("warning: \(warning)")
            }
        }
        say("data: \(users) users, \(crops) crops, BLAS \(BLASRuntime.summary)")
    }

    func baseChosen(_ base: BaseModel, fineTuning: FineTuning) {
        say(
            "base: \(base.manifest.name) v\(base.manifest.version) (\(base.source), sha256 \(base.manifestSHA256.prefix(12))), "
                + (fineTuning == .head
                    ? "extractor frozen, classifier trained on its embeddings"
                    : "whole network fine-tuned, then once per fold of users left out"))
    }

    func calibrated(rates: [String: Double], folds: Int, seconds: Double) {
        let text = rates.keys.sorted().map { String(format: "%@ %.3f", $0, rates[$0]!) }.joined(separator: ", ")
        say(
            String(
                format: "calibration (%d folds of users left out, %.1fs): strangers accepted at the threshold: ",
                folds, seconds) + text)
    }

    func fitStarted(trainingCrops: Int, heldOutCrops: Int, classes: Int, epochs: Int, resumedFrom: Int?) {
        self.epochs = epochs
        if style == .json {
            event(
                "start",
                [
                    "training_crops": trainingCrops, "held_out_crops": heldOutCrops, "classes": classes,
                    "epochs": epochs, "resumed_from_epoch": resumedFrom as Any,
                ])
        } else {
            let resumed = resumedFrom.map { ", resuming after epoch \($0)" } ?? ""
            say(
                "training on \(trainingCrops) crops, \(heldOutCrops) held out, \(classes) classes, "
                    + "\(epochs) epochs\(resumed)")
        }
    }

    func batchFinished(epoch: Int, batch: Int, batches: Int, imagesPerSecond: Double, loss: Double) {
        if batch == 1 { epochStart = Date() }
        guard style == .terminal, Date().timeIntervalSince(lastDraw) > 0.1 || batch == batches else { return }
        lastDraw = Date()
        let width = 24
        let filled = width * batch / max(batches, 1)
        let secondsLeft = Date().timeIntervalSince(epochStart) / Double(batch) * Double(batches - batch)
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let line = String(
            format: "\r epoch %d/%d [%@] %d/%d  %.0f img/s  loss %.4f  ETA %.0fs ", epoch, epochs, bar, batch, batches,
            imagesPerSecond, loss, secondsLeft)
        FileHandle.standardOutput.write(Data(line.utf8))
    }

    func epochFinished(_ record: EpochRecord, isBest: Bool) {
        switch style {
        case .json:
            event(
                "epoch",
                [
                    "epoch": record.epoch, "train_loss": record.trainLoss, "train_accuracy": record.trainAccuracy,
                    "held_out_loss": record.heldOutLoss, "held_out_accuracy": record.heldOutAccuracy,
                    "learning_rate": record.learningRate, "seconds": record.seconds, "best": isBest,
                ])
        case .terminal, .lines:
            // facetrain's own clear-line sequence goes out as it is; only the text passes `terminalSafe`.
            if style == .terminal { FileHandle.standardOutput.write(Data("\r\u{1B}[K".utf8)) }
            let line = String(
                format: "epoch %3d/%d  train loss %.4f acc %.3f  held-out loss %.4f acc %.3f  lr %.2e  %.1fs%@",
                record.epoch, epochs, record.trainLoss, record.trainAccuracy, record.heldOutLoss,
                record.heldOutAccuracy, record.learningRate, record.seconds, isBest ? "  *best" : "")
            print(line)
            fflush(nil)
        }
    }
}

/// Set by SIGINT/SIGTERM; the fit polls it between batches and stops cleanly. Atomic, so the
/// optimiser cannot hoist the read out of the training loop.
let interruptFlag = Atomic<Bool>(false)

/// Whether Ctrl-C (or SIGTERM) asked the fit to stop.
var interruptRequested: Bool { interruptFlag.load(ordering: .relaxed) }

/// Makes Ctrl-C request a clean stop instead of killing the process mid-write.
func installInterruptHandler() {
    // A parent may have blocked these signals (some process launchers do); unblock them here.
    var signals = sigset_t()
    sigemptyset(&signals)
    sigaddset(&signals, SIGINT)
    sigaddset(&signals, SIGTERM)
    pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    signal(SIGINT) { _ in interruptFlag.store(true, ordering: .relaxed) }
    signal(SIGTERM) { _ in interruptFlag.store(true, ordering: .relaxed) }
}
