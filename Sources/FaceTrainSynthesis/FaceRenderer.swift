import Foundation

/// Everything about one photo of a person that is not the person: framing, pose, expression, light, clothes
/// and the camera. Ranges are wide enough that two photos of one person can differ more in pixels than photos
/// of two similar people, so a classifier has to find the traits rather than match pixels.
struct PhotoConditions: Sendable {
    /// Zoom relative to a typical face-detector crop.
    var scale: Float
    var shiftX: Float
    var shiftY: Float
    /// Head roll in radians.
    var roll: Float
    /// Head turn: shifts features sideways by their depth and narrows the far eye.
    var yaw: Float
    /// Head nod: moves deep features (nose, mouth) up or down.
    var pitch: Float
    var smile: Float
    var mouthOpen: Float
    var browRaise: Float
    var frown: Float
    var blink: Bool
    var gaze: Point
    var wearsGlasses: Bool
    var hairVolume: Float
    var clothing: Color
    /// Direction of the key light in the image plane (unit length scaled by how much it comes from the side).
    var light: Point
    var lightStrength: Float
    var camera: Camera

    init(using random: inout SynthesisRandom) {
        scale = random.uniform(0.86...1.14)
        shiftX = random.symmetric(0.09)
        shiftY = random.symmetric(0.08)
        roll = random.normal() * 0.09
        yaw = random.symmetric(0.4)
        pitch = random.symmetric(0.3)
        smile = random.chance(0.4) ? random.uniform(0.2...0.9) : random.uniform(-0.2...0.15)
        mouthOpen = random.chance(0.25) ? random.uniform(0.01...0.06) : 0
        browRaise = random.chance(0.3) ? random.uniform(-0.015...0.035) : 0
        frown = random.chance(0.15) ? random.uniform(0.01...0.03) : 0
        blink = random.chance(0.07)
        gaze = Point(random.symmetric(0.025), random.symmetric(0.012))
        wearsGlasses = random.chance(0.88)
        hairVolume = random.uniform(0.96...1.04)
        clothing = Color.random(saturation: 0...0.8, value: 0.08...0.9, using: &random)
        let angle = random.uniform(0...(2 * Float.pi))
        let side = random.uniform(0.1...0.85)
        light = Point(cosf(angle) * side, sinf(angle) * side * 0.7)
        lightStrength = random.uniform(0.2...0.9)
        camera = Camera(using: &random)
    }
}

/// Paints one person in one photo and develops it into an 8-bit RGB crop.
enum FaceRenderer {
    /// The canvas is this many times larger than the output in each direction, for anti-aliasing.
    static let supersampling = 2
    /// How much of the crop a face of average size fills; detector crops are tight around the face.
    static let baseZoom: Float = 1.15

    /// `size`×`size` RGB bytes, row-major, of `identity` photographed under `conditions`.
    static func render(
        identity: FaceIdentity, conditions: PhotoConditions, size: Int,
        random: inout SynthesisRandom
    ) -> [UInt8] {
        let canvasSize = size * supersampling
        let half = Float(canvasSize) / 2
        var canvas = Canvas(
            width: canvasSize, height: canvasSize,
            view: ViewTransform(scale: half, angle: 0, originX: half, originY: half))
        Background.paint(&canvas, using: &random)
        canvas.view = ViewTransform(
            scale: half * baseZoom * conditions.scale, angle: conditions.roll,
            originX: half * (1 + conditions.shiftX), originY: half * (1 + conditions.shiftY))
        var painter = FacePainter(identity: identity, conditions: conditions, grainSeed: random.next())
        painter.paint(on: &canvas)
        return conditions.camera.develop(canvas, size: size, factor: supersampling)
    }

    /// Paints one face (with hair, ears, neck and shoulders) through `canvas.view` over whatever is there:
    /// the building block of a scene with several people. `conditions.camera` is not used.
    static func paint(identity: FaceIdentity, conditions: PhotoConditions, grainSeed: UInt64, on canvas: inout Canvas) {
        var painter = FacePainter(identity: identity, conditions: conditions, grainSeed: grainSeed)
        painter.paint(on: &canvas)
    }

    /// Where `paint` puts the face's five landmarks and its box outline, in face units (map them through the
    /// canvas view used to paint). Read from the same positions the painter draws with, not from pixels.
    static func geometry(identity: FaceIdentity, conditions: PhotoConditions) -> FaceGeometry {
        FacePainter(identity: identity, conditions: conditions, grainSeed: 0).geometry
    }
}

/// A drawn face's annotation in face units: what a detector should learn to find.
struct FaceGeometry: Sendable {
    /// faces_in_photos' order: the person's right eye centre (image left), left eye centre, nose tip, right
    /// mouth corner (image left), left mouth corner.
    let landmarks: [Point]
    /// Points on the edge of the region a WIDER FACE box covers; the box is their bounding rectangle after the
    /// view transform. See `FacePainter.geometry` for the rule.
    let boxOutline: [Point]
}

/// The drawing steps of a face, back to front, with the pose already applied to each feature's position.
private struct FacePainter {
    let person: FaceIdentity
    let photo: PhotoConditions
    let grainSeed: UInt64

    // Feature positions after pose and expression.
    let faceCenterX: Float
    let eyeY: Float
    let browY: Float
    let noseTip: Point
    let mouthCenter: Point
    let hairRadiusX: Float
    let hairRadiusY: Float

    init(identity: FaceIdentity, conditions: PhotoConditions, grainSeed: UInt64) {
        person = identity
        photo = conditions
        self.grainSeed = grainSeed
        // Yaw moves each feature sideways in proportion to how far it stands out from the head.
        faceCenterX = conditions.yaw * 0.02
        eyeY = identity.eyeHeight + conditions.pitch * 0.03
        browY = eyeY - identity.eyeSize * identity.eyeOpenness - identity.browGap - conditions.browRaise
        noseTip = Point(conditions.yaw * 0.24, eyeY + identity.noseLength + conditions.pitch * 0.05)
        mouthCenter = Point(conditions.yaw * 0.14, noseTip.y + identity.mouthGap + conditions.pitch * 0.02)
        hairRadiusX = identity.faceWidth * identity.hairVolume * conditions.hairVolume * 1.04
        hairRadiusY = identity.faceHeight * identity.hairVolume * conditions.hairVolume * 1.02
    }

    var skin: Color { person.skin }
    var eyeShift: Float { photo.yaw * 0.11 }
    /// Centre of the eye on the image's left (`side` -1, the person's right eye) or right (`side` 1).
    func eyeCenter(side: Float) -> Point { Point(side * person.eyeSpacing + eyeShift, eyeY) }
    var smile: Float { person.restingSmile + photo.smile }
    /// Half the mouth's width: wider when smiling, foreshortened when the head turns.
    var mouthHalfWidth: Float {
        person.mouthWidth / 2 * (1 + 0.12 * smile) * max(0.6, 1 - abs(photo.yaw) * 0.4)
    }
    /// How far a smile raises the mouth corners.
    var mouthCornerLift: Float { smile * 0.04 }
    /// The mouth corner on the image's left (`side` -1) or right (`side` 1), where every lip curve meets.
    func mouthCorner(side: Float) -> Point {
        Point(mouthCenter.x + side * mouthHalfWidth, mouthCenter.y - mouthCornerLift)
    }

    /// The box rule, WIDER FACE's convention as faces_in_photos shows it (on frontal faces its boxes run from
    /// about the hairline to the chin and from cheek to cheek, ears left out): the skin outline below the
    /// person's hairline, so the box spans the outline's full width, the hairline's height and the chin.
    /// Bald and fringed heads use the same hairline height, where the forehead would end.
    var geometry: FaceGeometry {
        let top = -person.faceHeight * person.hairline
        var outline: [Point] = []
        let steps = 24
        for step in 0...steps {
            let y = top + (person.faceHeight - top) * Float(step) / Float(steps)
            // The outline of `Shape.faceOutline`: an ellipse whose half-width narrows below the centre by the taper.
            let lower = max(0, y / person.faceHeight)
            let width = person.faceWidth * max(0.2, 1 - person.jawTaper * lower * lower)
            let ratio = y / person.faceHeight
            let halfWidth = width * max(0, 1 - ratio * ratio).squareRoot()
            outline.append(Point(faceCenterX - halfWidth, y))
            outline.append(Point(faceCenterX + halfWidth, y))
        }
        // Where the outline is widest (its centre line) when the hairline lies above it.
        if top < 0 {
            outline.append(Point(faceCenterX - person.faceWidth, 0))
            outline.append(Point(faceCenterX + person.faceWidth, 0))
        }
        return FaceGeometry(
            landmarks: [eyeCenter(side: -1), eyeCenter(side: 1), noseTip, mouthCorner(side: -1), mouthCorner(side: 1)],
            boxOutline: outline)
    }
    var hairCenter: Point { Point(faceCenterX + photo.yaw * 0.03, -0.06) }
    var faceShape: Shape {
        .faceOutline(
            center: Point(faceCenterX, 0), radiusX: person.faceWidth, radiusY: person.faceHeight,
            taper: person.jawTaper)
    }

    mutating func paint(on canvas: inout Canvas) {
        paintBody(on: &canvas)
        paintHairBehind(on: &canvas)
        paintEars(on: &canvas)
        canvas.fill(faceShape, skin)
        paintSkinDetails(on: &canvas)
        paintFacialHair(on: &canvas)
        for side: Float in [-1, 1] {
            paintEye(side: side, on: &canvas)
            paintBrow(side: side, on: &canvas)
        }
        paintNose(on: &canvas)
        paintMouth(on: &canvas)
        paintHairFront(on: &canvas)
        if photo.wearsGlasses, let glasses = person.glasses { paintGlasses(glasses, on: &canvas) }
        paintLight(on: &canvas)
    }

    private func paintBody(on canvas: inout Canvas) {
        let bottom = person.faceHeight
        canvas.fill(
            .ellipse(center: Point(0, bottom + 0.78), radiusX: 1.35, radiusY: 0.55, angle: 0), photo.clothing,
            grain: 0.05, grainSeed: grainSeed &+ 1)
        let neck = Shape.rectangle(
            Rect(
                minX: -person.faceWidth * 0.52, minY: 0.1,
                maxX: person.faceWidth * 0.52, maxY: bottom + 0.45))
        canvas.fill(neck, skin * 0.86)
        canvas.fill(
            .ellipse(
                center: Point(faceCenterX, bottom * 0.98), radiusX: person.faceWidth * 0.7,
                radiusY: 0.12, angle: 0), .black, opacity: 0.35, softness: 0.1)
    }

    private func paintHairBehind(on canvas: inout Canvas) {
        let hair = person.hairColor
        let head = Shape.ellipse(center: hairCenter, radiusX: hairRadiusX, radiusY: hairRadiusY, angle: 0)
        switch person.hairStyle {
        case .long:
            let lower = Shape.ellipse(
                center: Point(faceCenterX, 0.3), radiusX: person.faceWidth * 1.32,
                radiusY: person.faceHeight * 1.2, angle: 0)
            canvas.fill(.union(head, lower), hair, grain: 0.12, grainSeed: grainSeed &+ 2)
        case .curly:
            // A bumpy outline: discs around the top of the head.
            for step in 0..<11 {
                let angle = Float.pi * (1.05 + 0.9 * Float(step) / 10)
                let center = hairCenter + Point(cosf(angle) * hairRadiusX, sinf(angle) * hairRadiusY)
                canvas.fill(.ellipse(center: center, radiusX: 0.13, radiusY: 0.13, angle: 0), hair)
            }
            canvas.fill(
                .intersection(head, .above(Curve(centerX: 0, halfWidth: 1, base: 0.15, bend: 0))), hair,
                grain: 0.25, grainSeed: grainSeed &+ 2)
        case .short, .fringe:
            canvas.fill(
                .intersection(head, .above(Curve(centerX: 0, halfWidth: 1, base: eyeY, bend: 0))), hair,
                grain: 0.12, grainSeed: grainSeed &+ 2)
        case .bald:
            // A fringe of hair around the sides, above the ears.
            let sides = Shape.intersection(
                head, .rectangle(Rect(minX: -2, minY: eyeY - 0.2, maxX: 2, maxY: eyeY + 0.15)))
            canvas.fill(sides, hair, opacity: 0.9, grain: 0.15, grainSeed: grainSeed &+ 2)
        }
    }

    private func paintEars(on canvas: inout Canvas) {
        for side: Float in [-1, 1] {
            // The ear on the side the head turns towards slides behind the face.
            let x = faceCenterX + side * person.faceWidth * 0.98 - photo.yaw * 0.06
            let center = Point(x, eyeY + 0.1)
            let radiusX = 0.065 * person.earSize * (1 + side * photo.yaw * 0.8)
            canvas.fill(
                .ellipse(
                    center: center, radiusX: max(0.01, radiusX), radiusY: 0.13 * person.earSize,
                    angle: side * 0.15), skin * 0.93)
            canvas.fill(
                .ellipse(
                    center: center + Point(side * 0.01, 0), radiusX: max(0.005, radiusX * 0.5),
                    radiusY: 0.08 * person.earSize, angle: 0), skin * 0.7, opacity: 0.6, softness: 0.02)
        }
    }

    private func paintSkinDetails(on canvas: inout Canvas) {
        let cheekY = eyeY + person.noseLength * 0.75
        for side: Float in [-1, 1] {
            let eye = eyeCenter(side: side)
            canvas.fill(
                .ellipse(
                    center: eye + Point(0, -0.01), radiusX: person.eyeSize * 1.5,
                    radiusY: person.eyeSize * 1.1, angle: 0), skin * 0.72, opacity: 0.45, softness: 0.05)
            if person.blush > 0.02 {
                canvas.fill(
                    .ellipse(
                        center: Point(side * person.eyeSpacing * 1.1 + eyeShift, cheekY), radiusX: 0.1,
                        radiusY: 0.07, angle: 0), Color(bytes: 200, 80, 80), opacity: person.blush,
                    softness: 0.08)
            }
        }
        if let mole = person.mole {
            let center = Point(faceCenterX + mole.x * person.faceWidth * 1.3 + eyeShift, mole.y * person.faceHeight)
            canvas.fill(.ellipse(center: center, radiusX: 0.018, radiusY: 0.018, angle: 0), skin * 0.4)
        }
    }

    private func paintFacialHair(on canvas: inout Canvas) {
        guard let style = person.facialHair else { return }
        let hair = person.hairColor.mixed(with: .black, 0.2)
        let mouthY = mouthCenter.y
        switch style {
        case .beard, .stubble:
            // Below a line that runs under the cheekbones and rises to the sideburns.
            // Over the upper lip in the middle, rising along the cheeks to the sideburns.
            let line = Curve(
                centerX: faceCenterX, halfWidth: person.faceWidth, base: mouthY - person.upperLip - 0.05,
                bend: -(mouthY - person.upperLip - 0.05 - noseTip.y + 0.02))
            let opacity: Float = style == .beard ? 0.85 : 0.28
            canvas.fill(
                .intersection(faceShape, .below(line)), hair, opacity: opacity, softness: 0.03,
                grain: 0.15, grainSeed: grainSeed &+ 3)
            if style == .beard {
                canvas.fill(
                    .ellipse(
                        center: Point(mouthCenter.x, mouthY + 0.01), radiusX: person.mouthWidth * 0.55,
                        radiusY: 0.05, angle: 0), skin.mixed(with: hair, 0.4), opacity: 0.6, softness: 0.02)
            }
        case .moustache:
            let halfWidth = person.mouthWidth * 0.56
            let top = Curve(
                centerX: mouthCenter.x, halfWidth: halfWidth, base: mouthY - person.upperLip - 0.075,
                bend: 0.03)
            let bottom = Curve(
                centerX: mouthCenter.x, halfWidth: halfWidth, base: mouthY - person.upperLip - 0.005,
                bend: 0.045)
            canvas.fill(
                .band(minX: mouthCenter.x - halfWidth, maxX: mouthCenter.x + halfWidth, top: top, bottom: bottom),
                hair, opacity: 0.9, softness: 0.01, grain: 0.2, grainSeed: grainSeed &+ 3)
        }
    }

    private func paintEye(side: Float, on canvas: inout Canvas) {
        let center = eyeCenter(side: side)
        // The eye on the side the face turns towards is seen at a steeper angle, hence narrower.
        let radiusX = person.eyeSize * max(0.5, 1 - side * photo.yaw * 0.6)
        let angle = -side * person.eyeTilt
        let lidColor = person.browColor.mixed(with: .black, 0.5)
        let lidWidth = 0.012 + person.browThickness * 0.25
        if photo.blink {
            let closed = [center + Point(-radiusX, 0), center + Point(0, radiusX * 0.25), center + Point(radiusX, 0)]
            canvas.fill(.stroke(points: closed, startWidth: lidWidth, endWidth: lidWidth), lidColor)
            return
        }
        let radiusY = person.eyeSize * person.eyeOpenness
        let white = Shape.ellipse(center: center, radiusX: radiusX, radiusY: radiusY, angle: angle)
        canvas.fill(white, Color(0.92, 0.9, 0.87))
        let irisCenter = center + photo.gaze
        let irisRadius = person.eyeSize * 0.5
        canvas.fill(
            .intersection(
                white,
                .ellipse(
                    center: irisCenter, radiusX: irisRadius * (radiusX / person.eyeSize),
                    radiusY: irisRadius, angle: 0)), person.iris)
        canvas.fill(
            .intersection(
                white,
                .ellipse(
                    center: irisCenter, radiusX: irisRadius * 0.45,
                    radiusY: irisRadius * 0.45, angle: 0)), Color(0.04, 0.03, 0.03))
        // Upper lid: the top arc of the eye, drawn dark (lashes and lid crease).
        let cosine = cosf(angle)
        let sine = sinf(angle)
        let lid = stride(from: Float(-1), through: 1, by: 0.5).map { t -> Point in
            let local = Point(radiusX * t, -radiusY * (1 - t * t).squareRoot())
            return center + Point(cosine * local.x - sine * local.y, sine * local.x + cosine * local.y)
        }
        canvas.fill(.stroke(points: lid, startWidth: lidWidth * 0.7, endWidth: lidWidth), lidColor)
    }

    private func paintBrow(side: Float, on canvas: inout Canvas) {
        let spacing = person.eyeSpacing
        let size = person.eyeSize
        let inner = Point(side * (spacing - size * 0.95) + eyeShift, browY + photo.frown)
        let middle = Point(side * (spacing + size * 0.15) + eyeShift, browY - person.browArch)
        let outer = Point(side * (spacing + size * 1.3) + eyeShift, browY + person.browAngle)
        canvas.fill(
            .stroke(
                points: [inner, middle, outer], startWidth: person.browThickness,
                endWidth: person.browThickness * 0.55), person.browColor, opacity: 0.95, grain: 0.15,
            grainSeed: grainSeed &+ 4)
    }

    private func paintNose(on canvas: inout Canvas) {
        let width = person.noseWidth
        // The bridge is shaded on the side away from the light.
        let shadowSide: Float = photo.light.x >= 0 ? -1 : 1
        let bridgeTop = Point(eyeShift + shadowSide * 0.035, eyeY + 0.02)
        let bridgeBottom = noseTip + Point(shadowSide * width * 0.45, -0.03)
        canvas.fill(
            .stroke(points: [bridgeTop, bridgeBottom], startWidth: 0.03, endWidth: 0.05), skin * 0.7,
            opacity: 0.25 + photo.lightStrength * 0.3, softness: 0.03)
        canvas.fill(
            .ellipse(center: noseTip + Point(0, 0.035), radiusX: width * 0.55, radiusY: 0.04, angle: 0),
            skin * 0.6, opacity: 0.45, softness: 0.025)
        canvas.fill(
            .ellipse(center: noseTip, radiusX: width * 0.42, radiusY: width * 0.3, angle: 0), skin * 1.04,
            opacity: 0.7, softness: 0.015)
        for side: Float in [-1, 1] {
            canvas.fill(
                .ellipse(
                    center: noseTip + Point(side * width * 0.3, width * 0.2), radiusX: width * 0.15,
                    radiusY: width * 0.08, angle: side * 0.3), skin * 0.3, opacity: 0.85)
        }
    }

    private func paintMouth(on canvas: inout Canvas) {
        let smile = self.smile
        let lift = mouthCornerLift
        let halfWidth = mouthHalfWidth
        let x = mouthCenter.x
        let y = mouthCenter.y
        let open = photo.mouthOpen
        func curve(_ base: Float, _ bend: Float) -> Curve {
            Curve(centerX: x, halfWidth: halfWidth, base: base, bend: bend)
        }
        let innerTop = curve(y - open / 2, open / 2 - lift)
        let innerBottom = curve(y + open / 2, -open / 2 - lift)
        let lipTop = curve(y - open / 2 - person.upperLip, open / 2 - lift + person.upperLip)
        let lipBottom = curve(y + open / 2 + person.lowerLip, -open / 2 - lift - person.lowerLip)
        let minX = x - halfWidth
        let maxX = x + halfWidth
        canvas.fill(.band(minX: minX, maxX: maxX, top: lipTop, bottom: innerTop), person.lipColor * 0.85)
        canvas.fill(.band(minX: minX, maxX: maxX, top: innerBottom, bottom: lipBottom), person.lipColor)
        if open > 0 {
            let opening = Shape.band(minX: minX, maxX: maxX, top: innerTop, bottom: innerBottom)
            canvas.fill(opening, Color(0.16, 0.05, 0.05))
            if smile > 0.3 {
                let teeth = Shape.band(minX: minX, maxX: maxX, top: innerTop, bottom: curve(y - open * 0.05, -lift))
                canvas.fill(.intersection(opening, teeth), Color(0.9, 0.88, 0.82))
            }
        } else {
            let line = stride(from: Float(-1), through: 1, by: 0.25).map { t in
                Point(x + halfWidth * t, innerTop.y(at: x + halfWidth * t))
            }
            canvas.fill(.stroke(points: line, startWidth: 0.012, endWidth: 0.012), person.lipColor * 0.45, opacity: 0.9)
        }
    }

    private func paintHairFront(on canvas: inout Canvas) {
        let hair = person.hairColor
        let head = Shape.ellipse(center: hairCenter, radiusX: hairRadiusX, radiusY: hairRadiusY, angle: 0)
        let hairline: Curve
        switch person.hairStyle {
        case .bald:
            return
        case .fringe:
            hairline = Curve(centerX: hairCenter.x, halfWidth: person.faceWidth, base: browY - 0.05, bend: 0.08)
        case .short, .long, .curly:
            hairline = Curve(
                centerX: hairCenter.x, halfWidth: person.faceWidth, base: -person.faceHeight * person.hairline,
                bend: person.hairlineBend * person.faceHeight)
        }
        canvas.fill(.intersection(head, .above(hairline)), hair, softness: 0.01, grain: 0.12, grainSeed: grainSeed &+ 2)
        // A soft highlight where the light catches the top of the head.
        canvas.fill(
            .ellipse(
                center: hairCenter + Point(photo.light.x * 0.3, -hairRadiusY * 0.6), radiusX: 0.25,
                radiusY: 0.1, angle: 0), hair.mixed(with: .white, 0.4), opacity: 0.25 * photo.lightStrength,
            softness: 0.1)
        if person.hairStyle == .long {
            for side: Float in [-1, 1] {
                let lock = [
                    Point(hairCenter.x + side * person.faceWidth * 0.72, -person.faceHeight * 0.62),
                    Point(faceCenterX + side * person.faceWidth * 1.0, 0),
                    Point(faceCenterX + side * person.faceWidth * 1.08, person.faceHeight * 0.9),
                ]
                canvas.fill(
                    .stroke(points: lock, startWidth: 0.16, endWidth: 0.22), hair, grain: 0.12,
                    grainSeed: grainSeed &+ 2)
            }
        }
    }

    private func paintGlasses(_ glasses: FaceIdentity.Glasses, on canvas: inout Canvas) {
        var inner: [Point] = []
        for side: Float in [-1, 1] {
            let center = Point(side * person.eyeSpacing + eyeShift, eyeY + 0.005)
            let radiusX = glasses.radiusX * max(0.5, 1 - side * photo.yaw * 0.6)
            if glasses.tint > 0 {
                canvas.fill(
                    .ellipse(center: center, radiusX: radiusX, radiusY: glasses.radiusY, angle: 0),
                    Color(0.1, 0.1, 0.12), opacity: glasses.tint)
            }
            canvas.fill(
                .ring(center: center, radiusX: radiusX, radiusY: glasses.radiusY, thickness: glasses.thickness),
                glasses.frame)
            inner.append(center + Point(-side * radiusX, -glasses.radiusY * 0.25))
            let temple = [
                center + Point(side * radiusX, -glasses.radiusY * 0.3),
                Point(faceCenterX + side * person.faceWidth * 0.99, eyeY - 0.02),
            ]
            canvas.fill(
                .stroke(points: temple, startWidth: glasses.thickness, endWidth: glasses.thickness),
                glasses.frame)
        }
        let bridge = [inner[0], Point((inner[0].x + inner[1].x) / 2, inner[0].y - 0.02), inner[1]]
        canvas.fill(.stroke(points: bridge, startWidth: glasses.thickness, endWidth: glasses.thickness), glasses.frame)
    }

    /// Directional shading of the head as a rough sphere, so the light direction changes the whole face.
    private func paintLight(on canvas: inout Canvas) {
        let light = photo.light
        let depth = (max(0.05, 1 - light.x * light.x - light.y * light.y)).squareRoot()
        let strength = photo.lightStrength
        let radiusX = person.faceWidth * 1.15
        let radiusY = person.faceHeight * 1.1
        let view = canvas.view
        let centerX = faceCenterX
        canvas.shade { column, row, color in
            let point = view.facePoint(column: Float(column) + 0.5, row: Float(row) + 0.5)
            let nx = (point.x - centerX) / radiusX
            let ny = point.y / radiusY
            let radiusSquared = nx * nx + ny * ny
            guard radiusSquared < 1 else { return color }
            let nz = (1 - radiusSquared).squareRoot()
            let diffuse = max(0, nx * light.x + ny * light.y + nz * depth)
            // Fades out towards the rim so the shading joins the unshaded surroundings without a seam.
            let weight = min(1, (1 - radiusSquared) * 4)
            return color * (1 + strength * (diffuse - depth) * weight)
        }
    }
}
