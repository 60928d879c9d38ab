import FaceTrainEngine
import Foundation

/// Face descriptors of a stronger network for the crops of a corpus (`--teacher FILE.h5`): an
/// HDF5 file with `files` [N] (paths ending in "<identity>/<crop>") and `descriptors` [N, D].
///
/// Two ways to learn from them (`--teacher-loss`):
/// - relational: over each batch the student's cosine similarities are pulled towards the
///   teacher's (Park et al. 2019), so the student learns which faces the teacher finds alike, in
///   its own embedding space;
/// - feature: a linear map of the student's embedding (trained with it, not shipped) is pulled
///   towards each crop's own descriptor (1 − cosine), the far richer signal per crop.
/// Either way the descriptors are centred on the mean of the training crops' descriptors first
/// (dlib's lie in a narrow cone: two random people have cosine 0.83), and only training crops
/// count towards that mean, so no verification or bank crop shapes the training.
public struct TeacherDescriptors: Sendable {
    /// The descriptor per crop path "<identity>/<crop>", as stored.
    public var byPath: [String: [Float]]
    public var file: String
    /// Full path, for messages.
    public var path: String
    /// SHA-256 of the file: a checkpoint of a run distilling it belongs to this content.
    public var contentSHA256: String

    public static func load(_ url: URL) throws(CorpusError) -> TeacherDescriptors {
        do {
            let (files, shape, scalars) = try HDF5File.withLibrary {
                let file = try HDF5File.open(at: url.path)
                let files = try file.root.readFixedStrings("files")
                let (shape, scalars) = try file.root.readDataset("descriptors")
                try file.close()
                return (files, shape, scalars)
            }
            guard shape.count == 2, shape[0] == files.count, shape[1] > 0 else {
                throw CorpusError.badTeacher(path: url.path, reason: "descriptors \(shape) for \(files.count) files")
            }
            let features = shape[1]
            var byPath: [String: [Float]] = [:]
            for (row, path) in files.enumerated() {
                let parts = path.split(separator: "/")
                guard parts.count >= 2 else { continue }
                byPath[parts.suffix(2).joined(separator: "/")] = Array(
                    scalars[(row * features)..<((row + 1) * features)])
            }
            let sha = (try? SHA256.hashFile(at: url).sha256) ?? ""
            return TeacherDescriptors(byPath: byPath, file: url.lastPathComponent, path: url.path, contentSHA256: sha)
        } catch let error as CorpusError {
            throw error
        } catch {
            throw .badTeacher(path: url.path, reason: "\(error)")
        }
    }

    /// The rows centred on their own mean (nil rows stay nil and do not count) and scaled to unit length.
    static func centredUnitRows(_ rows: [[Float]?]) -> [[Float]?] {
        let present = rows.compactMap { $0 }
        guard let features = present.first?.count else { return rows }
        var mean = [Double](repeating: 0, count: features)
        for row in present { for column in 0..<features { mean[column] += Double(row[column]) } }
        let centre = mean.map { Float($0 / Double(present.count)) }
        return rows.map { row in row.map { vector in ModelEvaluation.unitLength(zip(vector, centre).map { $0 - $1 }) } }
    }

    /// Feature distillation loss of a batch: mean over the rows with a descriptor of
    /// weight·(1 − cos(P·e, t)) for the projection P [teacher features, student features] and the
    /// unit teacher row t. Returns the loss, dLoss/dEmbeddings and dLoss/dP.
    static func featureLoss(embeddings: Tensor, teacher: [[Float]?], projection: Tensor, weight: Float)
        -> (loss: Float, embeddingGradient: Tensor, projectionGradient: Tensor)
    {
        let batch = embeddings.shape[0]
        let features = embeddings.shape[1]
        let targets = projection.shape[0]
        precondition(
            projection.shape == [targets, features], "projection \(projection.shape) for \(features) features")
        // Y = E·Pᵀ [batch, targets].
        var projected = [Float](repeating: 0, count: batch * targets)
        embeddings.scalars.withUnsafeBufferPointer { e in
            projection.scalars.withUnsafeBufferPointer { p in
                projected.withUnsafeMutableBufferPointer { y in
                    gemm(
                        transposeA: false, transposeB: true, m: batch, n: targets, k: features, a: e.baseAddress!,
                        b: p.baseAddress!, c: y.baseAddress!)
                }
            }
        }
        let count = Float(max(teacher.compactMap { $0 }.count, 1))
        var loss: Float = 0
        // dL/dy = −(weight/count)·(t − cos·u)/|y| with u = y/|y|: the part of t across u, over |y|.
        var projectedGradient = [Float](repeating: 0, count: batch * targets)
        for row in 0..<batch {
            guard let target = teacher[row] else { continue }
            precondition(target.count == targets, "teacher row of \(target.count) for \(targets) outputs")
            let offset = row * targets
            var squared: Float = 0
            for column in 0..<targets { squared += projected[offset + column] * projected[offset + column] }
            let length = max(squared.squareRoot(), 1e-12)
            var cosine: Float = 0
            for column in 0..<targets { cosine += projected[offset + column] / length * target[column] }
            loss += weight * (1 - cosine) / count
            let factor = -weight / count / length
            for column in 0..<targets {
                let unit = projected[offset + column] / length
                projectedGradient[offset + column] = factor * (target[column] - cosine * unit)
            }
        }
        // dL/dE = dL/dY·P; dL/dP = dL/dYᵀ·E.
        var embeddingGradient = [Float](repeating: 0, count: batch * features)
        var projectionGradient = [Float](repeating: 0, count: targets * features)
        projectedGradient.withUnsafeBufferPointer { g in
            projection.scalars.withUnsafeBufferPointer { p in
                embeddingGradient.withUnsafeMutableBufferPointer { d in
                    gemm(
                        transposeA: false, transposeB: false, m: batch, n: features, k: targets, a: g.baseAddress!,
                        b: p.baseAddress!, c: d.baseAddress!)
                }
            }
            embeddings.scalars.withUnsafeBufferPointer { e in
                projectionGradient.withUnsafeMutableBufferPointer { d in
                    gemm(
                        transposeA: true, transposeB: false, m: targets, n: features, k: batch, a: g.baseAddress!,
                        b: e.baseAddress!, c: d.baseAddress!)
                }
            }
        }
        return (
            loss, Tensor(shape: [batch, features], scalars: embeddingGradient),
            Tensor(shape: [targets, features], scalars: projectionGradient)
        )
    }

    /// Relational distillation loss of a batch and its gradient with respect to the student's
    /// embeddings: mean over pairs of (cos_student − cos_teacher)², over the rows that have a
    /// teacher descriptor (`teacher[i]` nil rows take no part).
    static func relationalLoss(embeddings: Tensor, teacher: [[Float]?], weight: Float) -> (
        loss: Float, gradient: Tensor
    ) {
        let batch = embeddings.shape[0]
        let features = embeddings.shape[1]
        let (unit, norms) = CosineMarginSoftmax.normalizeRows(embeddings.scalars, rows: batch, columns: features)
        let present = (0..<batch).map { teacher[$0] != nil }
        let count = present.filter { $0 }.count
        let pairs = Float(max(count * (count - 1), 1))
        let teacherFeatures = teacher.first { $0 != nil }??.count ?? 0
        var teacherUnit = [Float](repeating: 0, count: batch * teacherFeatures)
        for (row, vector) in teacher.enumerated() {
            if let vector {
                teacherUnit.replaceSubrange((row * teacherFeatures)..<((row + 1) * teacherFeatures), with: vector)
            }
        }
        // S = ÛÛᵀ and T = T̂T̂ᵀ; D = S − T on the pairs that count; dÛ = (4/pairs)·D·Û (D is symmetric).
        var student = [Float](repeating: 0, count: batch * batch)
        var target = [Float](repeating: 0, count: batch * batch)
        unit.withUnsafeBufferPointer { u in
            student.withUnsafeMutableBufferPointer { s in
                gemm(
                    transposeA: false, transposeB: true, m: batch, n: batch, k: features, a: u.baseAddress!,
                    b: u.baseAddress!, c: s.baseAddress!)
            }
        }
        if teacherFeatures > 0 {
            teacherUnit.withUnsafeBufferPointer { t in
                target.withUnsafeMutableBufferPointer { g in
                    gemm(
                        transposeA: false, transposeB: true, m: batch, n: batch, k: teacherFeatures, a: t.baseAddress!,
                        b: t.baseAddress!, c: g.baseAddress!)
                }
            }
        }
        var loss: Float = 0
        var difference = [Float](repeating: 0, count: batch * batch)
        for i in 0..<batch where present[i] {
            for j in 0..<batch where j != i && present[j] {
                let d = student[i * batch + j] - target[i * batch + j]
                loss += d * d / pairs
                difference[i * batch + j] = 4 * d / pairs
            }
        }
        var unitGradient = [Float](repeating: 0, count: batch * features)
        difference.withUnsafeBufferPointer { d in
            unit.withUnsafeBufferPointer { u in
                unitGradient.withUnsafeMutableBufferPointer { g in
                    gemm(
                        transposeA: false, transposeB: false, m: batch, n: features, k: batch, a: d.baseAddress!,
                        b: u.baseAddress!, c: g.baseAddress!)
                }
            }
        }
        for index in unitGradient.indices { unitGradient[index] *= weight }
        let gradient = CosineMarginSoftmax.backwardNormalize(
            unitGradient: unitGradient, unit: unit, norms: norms, columns: features)
        return (loss * weight, Tensor(shape: [batch, features], scalars: gradient))
    }
}
