import FaceTrainEngine
import Foundation

/// How well embeddings tell whether two crops show the same person, the way face-verification
/// benchmarks (LFW) measure it: pair accuracy over 10 folds, and the true-accept rate at fixed
/// false-accept rates over every pair of crops.
public struct VerificationMetrics: Codable, Sendable, Equatable {
    public var identities: Int
    public var crops: Int
    /// Mean over 10 folds of the accuracy on that fold at the threshold best on the other nine.
    public var pairAccuracy: Double
    public var pairAccuracyStandardDeviation: Double
    public var pairs: Int
    public var genuinePairs: Int
    public var impostorPairs: Int
    /// True-accept rate at a false-accept rate of 1e-2 and 1e-3, over every pair of crops.
    public var trueAcceptAt1e2: Double
    public var trueAcceptAt1e3: Double
    /// The ROC: true-accept rate at each false-accept rate of `RocPoint.rates`.
    public var roc: [RocPoint]

    public struct RocPoint: Codable, Sendable, Equatable {
        public var falseAcceptRate: Double
        public var trueAcceptRate: Double
        public var threshold: Double
        static let rates = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.2, 0.3, 0.5]
    }

    enum CodingKeys: String, CodingKey {
        case identities, crops, pairs, roc
        case pairAccuracy = "pair_accuracy"
        case pairAccuracyStandardDeviation = "pair_accuracy_std"
        case genuinePairs = "genuine_pairs"
        case impostorPairs = "impostor_pairs"
        case trueAcceptAt1e2 = "tar_at_far_1e-2"
        case trueAcceptAt1e3 = "tar_at_far_1e-3"
    }

    /// Measures `embeddings` (one row per crop, any length) labelled by `identities`.
    ///
    /// The 10 folds hold 300 genuine and 300 impostor pairs each where the crops allow it, drawn
    /// from `seed`; every fold's threshold is chosen on the other nine, as in LFW's protocol.
    public static func measure(embeddings: [[Float]], identities: [Int], seed: UInt64 = 7) -> VerificationMetrics {
        let count = embeddings.count
        precondition(count == identities.count, "one identity per embedding")
        let unit = embeddings.map(ModelEvaluation.unitLength)
        // Every pair: genuine scores all kept, impostor scores all kept (4,000 crops give 8 M).
        var genuine: [Float] = []
        var impostor: [Float] = []
        impostor.reserveCapacity(count * (count - 1) / 2)
        let dimension = unit.first?.count ?? 0
        var flat = [Float](repeating: 0, count: count * dimension)
        for (row, values) in unit.enumerated() {
            flat.replaceSubrange((row * dimension)..<((row + 1) * dimension), with: values)
        }
        var scores = [Float](repeating: 0, count: count * count)
        if count > 0 && dimension > 0 {
            flat.withUnsafeBufferPointer { e in
                scores.withUnsafeMutableBufferPointer { s in
                    gemm(
                        transposeA: false, transposeB: true, m: count, n: count, k: dimension, a: e.baseAddress!,
                        b: e.baseAddress!, c: s.baseAddress!)
                }
            }
        }
        for a in 0..<count {
            for b in (a + 1)..<max(count, a + 1) {
                if identities[a] == identities[b] {
                    genuine.append(scores[a * count + b])
                } else {
                    impostor.append(scores[a * count + b])
                }
            }
        }
        impostor.sort(by: >)
        genuine.sort(by: >)
        func trueAccept(atFalseAccept rate: Double) -> (rate: Double, threshold: Double) {
            guard !impostor.isEmpty, !genuine.isEmpty else { return (0, 1) }
            // The threshold lets through at most `rate` of the impostor pairs (strictly above it).
            let allowed = Int((rate * Double(impostor.count)).rounded(.down))
            let threshold = allowed < impostor.count ? impostor[allowed] : -1
            let accepted = genuine.prefix { $0 > threshold }.count
            return (Double(accepted) / Double(genuine.count), Double(threshold))
        }
        let roc = RocPoint.rates.map { rate in
            let (tar, threshold) = trueAccept(atFalseAccept: rate)
            return RocPoint(falseAcceptRate: rate, trueAcceptRate: tar, threshold: threshold)
        }

        // LFW-style folds.
        var generator = SplitMix64(seed: seed)
        var byIdentity: [Int: [Int]] = [:]
        for (index, identity) in identities.enumerated() { byIdentity[identity, default: []].append(index) }
        let repeated = byIdentity.keys.sorted().filter { byIdentity[$0]!.count >= 2 }
        let folds = 10
        let perFold = 300
        var foldPairs: [[(Float, Bool)]] = Array(repeating: [], count: folds)
        if !repeated.isEmpty && byIdentity.count >= 2 {
            for fold in 0..<folds {
                for _ in 0..<perFold {
                    let identity = repeated[Int(generator.next() % UInt64(repeated.count))]
                    let members = byIdentity[identity]!
                    let first = Int(generator.next() % UInt64(members.count))
                    var second = Int(generator.next() % UInt64(members.count - 1))
                    if second >= first { second += 1 }
                    foldPairs[fold].append((scores[members[first] * count + members[second]], true))
                    var other: Int
                    repeat { other = Int(generator.next() % UInt64(count)) } while identities[other] == identity
                    let anchor = members[Int(generator.next() % UInt64(members.count))]
                    foldPairs[fold].append((scores[anchor * count + other], false))
                }
            }
        }
        var accuracies: [Double] = []
        for fold in 0..<folds where !foldPairs[fold].isEmpty {
            let training = (0..<folds).filter { $0 != fold }.flatMap { foldPairs[$0] }
            let threshold = bestThreshold(training)
            let correct = foldPairs[fold].filter { ($0.0 > threshold) == $0.1 }.count
            accuracies.append(Double(correct) / Double(foldPairs[fold].count))
        }
        let mean = accuracies.isEmpty ? 0 : accuracies.reduce(0, +) / Double(accuracies.count)
        let variance =
            accuracies.isEmpty ? 0 : accuracies.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(accuracies.count)
        return VerificationMetrics(
            identities: byIdentity.count, crops: count, pairAccuracy: mean,
            pairAccuracyStandardDeviation: variance.squareRoot(), pairs: foldPairs.reduce(0) { $0 + $1.count },
            genuinePairs: genuine.count, impostorPairs: impostor.count,
            trueAcceptAt1e2: trueAccept(atFalseAccept: 1e-2).rate,
            trueAcceptAt1e3: trueAccept(atFalseAccept: 1e-3).rate,
            roc: roc)
    }

    /// The threshold (between two neighbouring scores) that classifies most pairs right.
    static func bestThreshold(_ pairs: [(Float, Bool)]) -> Float {
        let sorted = pairs.sorted { $0.0 > $1.0 }
        // Threshold just below sorted[i]: pairs 0...i accepted. Start with everything rejected.
        var correct = sorted.filter { !$0.1 }.count
        var best = correct
        var threshold = (sorted.first?.0 ?? 0) + 1e-6
        for (index, pair) in sorted.enumerated() {
            correct += pair.1 ? 1 : -1
            // Only between two different scores: a threshold equal to tied scores would reject
            // pairs this count accepted.
            let next = index + 1 < sorted.count ? sorted[index + 1].0 : pair.0 - 1
            if correct > best && next < pair.0 {
                best = correct
                threshold = (pair.0 + next) / 2
            }
        }
        return threshold
    }
}
