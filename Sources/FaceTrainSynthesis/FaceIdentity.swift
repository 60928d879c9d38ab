import Foundation

/// The stable traits of one synthetic person: what stays the same across all of their photos.
///
/// Distances are in face units (the crop spans about [-1, 1]); every trait is drawn independently, so two
/// people almost always differ in several traits at once, as real people do.
struct FaceIdentity: Sendable {
    enum HairStyle: CaseIterable, Sendable { case short, long, bald, fringe, curly }
    enum FacialHair: CaseIterable, Sendable { case stubble, moustache, beard }

    /// Frames worn in most, not all, of a person's photos.
    struct Glasses: Sendable {
        var radiusX: Float
        var radiusY: Float
        var thickness: Float
        var frame: Color
        /// Lens tint opacity; 0 for clear lenses.
        var tint: Float
    }

    // Face shape and skin
    var faceWidth: Float
    var faceHeight: Float
    var jawTaper: Float
    var skin: Color
    var blush: Float
    var earSize: Float
    // Eyes and brows
    var eyeSpacing: Float
    var eyeSize: Float
    var eyeOpenness: Float
    var eyeHeight: Float
    var eyeTilt: Float
    var iris: Color
    var browThickness: Float
    var browAngle: Float
    var browArch: Float
    var browGap: Float
    var browColor: Color
    // Nose and mouth
    var noseLength: Float
    var noseWidth: Float
    var mouthWidth: Float
    var mouthGap: Float
    var upperLip: Float
    var lowerLip: Float
    var lipColor: Color
    var restingSmile: Float
    // Hair and accessories
    var hairStyle: HairStyle
    var hairColor: Color
    var hairVolume: Float
    var hairline: Float
    var hairlineBend: Float
    var facialHair: FacialHair?
    var glasses: Glasses?
    /// A mole or freckle cluster position relative to the face centre, if the person has one.
    var mole: Point?

    /// A random person; the same generator state always gives the same person.
    init(using random: inout SynthesisRandom) {
        faceWidth = random.uniform(0.48...0.64)
        faceHeight = random.uniform(0.68...0.84)
        jawTaper = random.uniform(0.05...0.5)
        skin = Self.skinTone(random.unit()).jittered(0.06, using: &random)
        blush = random.uniform(0...0.25)
        earSize = random.uniform(0.85...1.2)

        eyeSpacing = faceWidth * random.uniform(0.33...0.46)
        eyeSize = random.uniform(0.055...0.09)
        eyeOpenness = random.uniform(0.42...0.7)
        eyeHeight = random.uniform(-0.14...(-0.04))
        eyeTilt = random.uniform(-0.08...0.14)
        iris = random.element(of: Self.irisColors).jittered(0.1, using: &random)

        hairStyle = random.element(of: [.short, .short, .long, .long, .bald, .fringe, .curly])
        hairColor = random.element(of: Self.hairColors).jittered(0.12, using: &random)
        hairVolume = random.uniform(1.02...1.16) + (hairStyle == .curly ? 0.12 : 0)
        hairline = random.uniform(0.5...0.72)
        hairlineBend = random.uniform(-0.1...0.35)

        browThickness = random.uniform(0.016...0.048)
        browAngle = random.uniform(-0.05...0.06)
        browArch = random.uniform(0...0.045)
        browGap = random.uniform(0.075...0.13)
        let browBase = hairStyle == .bald || random.chance(0.2) ? random.element(of: Self.hairColors) : hairColor
        browColor = browBase.mixed(with: .black, random.uniform(0.1...0.4))

        noseLength = random.uniform(0.17...0.3)
        noseWidth = random.uniform(0.085...0.16)
        mouthWidth = random.uniform(0.24...0.4)
        mouthGap = random.uniform(0.11...0.19)
        upperLip = random.uniform(0.012...0.034)
        lowerLip = random.uniform(0.018...0.05)
        lipColor = skin.mixed(with: Color(bytes: 170, 60, 70), random.uniform(0.25...0.6))
        restingSmile = random.uniform(-0.1...0.35)

        facialHair = random.chance(0.3) ? random.element(of: FacialHair.allCases) : nil
        if random.chance(0.28) {
            let radius = eyeSize * random.uniform(1.45...1.9)
            glasses = Glasses(
                radiusX: radius, radiusY: radius * random.uniform(0.65...1.0),
                thickness: random.uniform(0.01...0.03),
                frame: random.element(of: Self.frameColors), tint: random.chance(0.2) ? 0.35 : 0)
        }
        mole = random.chance(0.3) ? Point(random.symmetric(0.4), random.uniform(-0.05...0.5)) : nil
    }

    /// Skin tones from very light to very dark; `position` in [0, 1] interpolates between neighbours.
    static func skinTone(_ position: Float) -> Color {
        let tones = [
            Color(bytes: 255, 226, 204), Color(bytes: 241, 198, 170), Color(bytes: 224, 172, 128),
            Color(bytes: 198, 140, 96), Color(bytes: 160, 104, 66), Color(bytes: 118, 74, 46),
            Color(bytes: 82, 52, 36),
        ]
        let scaled = min(max(position, 0), 0.9999) * Float(tones.count - 1)
        let index = Int(scaled)
        return tones[index].mixed(with: tones[index + 1], scaled - Float(index))
    }

    static let hairColors = [
        Color(bytes: 22, 18, 16), Color(bytes: 40, 28, 22), Color(bytes: 62, 42, 30), Color(bytes: 102, 70, 46),
        Color(bytes: 148, 108, 72), Color(bytes: 212, 178, 120), Color(bytes: 146, 66, 36),
        Color(bytes: 150, 148, 146), Color(bytes: 218, 216, 210),
    ]
    static let irisColors = [
        Color(bytes: 58, 34, 20), Color(bytes: 96, 58, 30), Color(bytes: 128, 98, 52), Color(bytes: 78, 118, 70),
        Color(bytes: 70, 108, 168), Color(bytes: 118, 128, 140),
    ]
    static let frameColors = [
        Color(bytes: 15, 15, 18), Color(bytes: 70, 40, 25), Color(bytes: 190, 160, 90), Color(bytes: 170, 172, 178),
        Color(bytes: 120, 20, 30),
    ]
}
