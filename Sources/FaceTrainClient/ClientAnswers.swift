import Foundation

/// The answers of `facetrain serve` the client decodes, as the server writes them (docs/openapi.json
/// has their schemas). Only the fields an app uses; unknown ones are ignored, so a newer server
/// still decodes.

/// A registered person.
public struct Person: Codable, Sendable, Equatable {
    /// The class label of the Core ML model is this id as a string.
    public var id: Int
    public var name: String
    public var position: String?
    public var crops: Int
}

/// The answer to an upload: one result per file, in the order sent.
public struct UploadResult: Codable, Sendable, Equatable {
    public struct File: Codable, Sendable, Equatable {
        /// The file name the client sent.
        public var file: String
        /// "stored", "duplicate" or "rejected".
        public var result: String
        /// The stored name, `<sha256>.<ext>`.
        public var name: String?
        /// Why it was rejected.
        public var reason: String?
    }

    public var stored: Int
    public var duplicates: Int
    public var rejected: Int
    /// The person's crops after the upload.
    public var crops: Int
    public var files: [File]
    /// Set when none of the files could be stored (HTTP 422).
    public var error: String?
}

/// A training job and its progress.
public struct TrainingJob: Codable, Sendable, Equatable {
    public enum State: String, Codable, Sendable {
        case queued, running, succeeded, failed
        /// Trained, but the publish gate refused it (`error` says why).
        case refused
    }

    public var job: Int
    public var state: State
    public var step: String?
    /// 0...1 over the training epochs.
    public var progress: Double?
    /// The version it wrote, and whether that version was published.
    public var version: Int?
    public var published: Bool?
    public var userAccuracy: Double?
    public var error: String?
}

/// `GET /v1/model`: the published version.
public struct ModelInfo: Codable, Sendable, Equatable {
    /// The people of this version: the model's class label `"7"` is the user with id 7 (labels 1,
    /// not a face, and 2, an unknown person, are not people and are not listed).
    public struct User: Codable, Sendable, Equatable {
        public var id: Int
        public var name: String
        public var position: String?
    }

    public var version: Int
    /// The Core ML file: a path on this server or an absolute URL (`--base-url`).
    public var url: String
    public var users: [User]
    /// SHA-256 of the Core ML file (also its ETag).
    public var sha256: String
    public var size: Int
    public var publishedAt: String
}

/// One face of a recognised photo.
public struct RecognizedFace: Codable, Sendable, Equatable {
    public struct Candidate: Codable, Sendable, Equatable {
        public var label: String
        public var name: String
        public var probability: Double
    }

    /// The crop a correction can file, kept by the server for a while.
    public struct Crop: Codable, Sendable, Equatable {
        public var sha256: String
        public var url: String
    }

    /// [x, y, width, height] in the photo's pixels.
    public var box: [Double]
    public var score: Double
    /// True when the photo was this one face and was classified whole (as the app does a Vision crop).
    public var wholeImage: Bool
    /// The most probable class, its name and probability.
    public var label: String
    public var name: String
    public var probability: Double
    /// The app's decision at the bundle's threshold: a user id, "2" (unknown person) or "1" (not a face).
    public var decision: String
    public var accepted: Bool
    public var threshold: Double
    public var top: [Candidate]
    public var crop: Crop?

    enum CodingKeys: String, CodingKey {
        case box, score, label, name, probability, decision, accepted, threshold, top, crop
        case wholeImage = "whole_image"
    }
}

/// `POST /v1/recognize`: the faces, largest first.
public struct Recognition: Codable, Sendable, Equatable {
    public var version: Int
    public var width: Int
    public var height: Int
    public var faces: [RecognizedFace]
}

/// `POST /v1/users/{id}/verify`.
public struct Verification: Codable, Sendable, Equatable {
    public var user: Int
    public var version: Int
    /// The app's decision: the largest face is accepted as this person.
    public var verified: Bool
    /// The model's probability for this person; nil when the version was trained without them (`note`).
    public var probability: Double?
    public var threshold: Double
    public var face: RecognizedFace
    public var note: String?
}

struct PersonAnswer: Decodable { var user: Person }
struct PeopleAnswer: Decodable { var users: [Person] }
struct TrainingAnswer: Decodable { var record: TrainingJob }
