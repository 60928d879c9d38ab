import Foundation

/// Face descriptors of a stronger network for the crops of a corpus (`--teacher FILE.h5`): an
/// HDF5 file with `files` [N] (paths ending in "<identity>/<crop>") and `descriptors` [N, D].
///
/// Pretraining distils their relations, not the vectors: over each batch the student's cosine
/// similarities are pulled towards the teacher's (relational distillation, Park et al. 2019), so
/// the student learns which faces a network trained on millions of faces finds alike, in its
/// own embedding space. The teacher's descriptors are centred first (dlib's all lie in a narrow
/// cone), so its cosines span the range the student's centred embeddings use.
public struct TeacherDescriptors: Sendable {
    /// Unit-length centred descriptor per crop path "<identity>/<crop>".
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
            var mean = [Float](repeating: 0, count: features)
            for row in 0..<files.count {
                for column in 0..<features { mean[column] += scalars[row * features + column] / Float(files.count) }
            }
            var byPath: [String: [Float]] = [:]
            for (row, path) in files.enumerated() {
                let parts = path.split(separator: "/")
                guard parts.count >= 2 else { continue }
                let key = parts.suffix(2).joined(separator: "/")
                byPath[key] = ModelEvaluation.unitLength((0..<features).map { scalars[row * features + $0] - mean[$0] })
            }
            let sha = (try? SHA256.hashFile(at: url).sha256) ?? ""
            return TeacherDescriptors(byPath: byPath, file: url.lastPathComponent, path: url.path, contentSHA256: sha)
        } catch let error as CorpusError {
            throw error
        } catch {
            throw .badTeacher(path: url.path, reason: "\(error)")
        }
    }

    /// Relational distillation loss of a batch and its gradient with respect to the student's
    /// embeddings: mean over pairs of (cos_student − cos_teacher)², over the rows that have a
    /// teacher descriptor (`teacher[i]` nil rows take no part).
    static func relationalLoss(embeddings: Tensor, teacher: [[Float]?], weight: Float) -> (loss: Float, gradient: Tensor) {
        let batch = embeddings.shape[0]
        let features = embeddings.shape[1]
        let (unit, norms) = CosineMarginSoftmax.normalizeRows(embeddings.scalars, rows: batch, columns: features)
        let present = (0..<batch).map { teacher[$0] != nil }
        let count = present.filter { $0 }.count
        let pairs = Float(max(count * (count - 1), 1))
        let teacherFeatures = teacher.first { $0 != nil }??.count ?? 0
        var teacherUnit = [Float](repeating: 0, count: batch * teacherFeatures)
        for (row, vector) in teacher.enumerated() {
            if let vector { teacherUnit.replaceSubrange((row * teacherFeatures)..<((row + 1) * teacherFeatures), with: vector) }
        }
        // S = ÛÛᵀ and T = T̂T̂ᵀ; D = S − T on the pairs that count; dÛ = (4/pairs)·D·Û (D is symmetric).
        var student = [Float](repeating: 0, count: batch * batch)
        var target = [Float](repeating: 0, count: batch * batch)
        unit.withUnsafeBufferPointer { u in
            student.withUnsafeMutableBufferPointer { s in
                gemm(transposeA: false, transposeB: true, m: batch, n: batch, k: features, a: u.baseAddress!,
                     b: u.baseAddress!, c: s.baseAddress!)
            }
        }
        if teacherFeatures > 0 {
            teacherUnit.withUnsafeBufferPointer { t in
                target.withUnsafeMutableBufferPointer { g in
                    gemm(transposeA: false, transposeB: true, m: batch, n: batch, k: teacherFeatures, a: t.baseAddress!,
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
                    gemm(transposeA: false, transposeB: false, m: batch, n: features, k: batch, a: d.baseAddress!,
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
