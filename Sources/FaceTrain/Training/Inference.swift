import FaceTrainEngine
import Foundation

/// Runs a network over many crops in batches: probabilities for scoring, embeddings for the map.
public enum Inference {
    static let batchSize = 64

    /// Softmax output per sample, in the model's class order. A network that cannot run the
    /// crops throws: a row of zeros would be scored as a wrong answer, silently.
    public static func probabilities(of samples: [FaceSample], with network: inout Network, definition: ModelDefinition)
        throws -> [[Float]]
    {
        try run(samples, definition: definition) { images in try network.probabilities(for: images) }
    }

    /// The face embedding (`Network.embeddings`: the input of the L2 normalisation) per sample.
    public static func embeddings(of samples: [FaceSample], with network: inout Network, definition: ModelDefinition)
        throws -> [[Float]]
    {
        try run(samples, definition: definition) { images in try network.embeddings(for: images) }
    }

    /// Normalised input tensor of some samples.
    public static func batch(_ samples: ArraySlice<FaceSample>, input: InputSpecification) -> Tensor {
        var images = Tensor(zeros: [samples.count, input.channels, input.height, input.width])
        let plane = input.channels * input.width * input.height
        let list = Array(samples)
        images.scalars.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            Parallel.forEach(list.count) { index in
                ImageTensor.write(list[index].image, input: input, to: base + index * plane)
            }
        }
        return images
    }

    private static func run(_ samples: [FaceSample], definition: ModelDefinition, _ body: (Tensor) throws -> Tensor)
        rethrows -> [[Float]]
    {
        var rows: [[Float]] = []
        rows.reserveCapacity(samples.count)
        var start = 0
        while start < samples.count {
            let end = min(start + batchSize, samples.count)
            let output = try body(batch(samples[start..<end], input: definition.input))
            let width = output.count / (end - start)
            for row in 0..<(end - start) { rows.append(Array(output.scalars[(row * width)..<((row + 1) * width)])) }
            start = end
        }
        return rows
    }
}
