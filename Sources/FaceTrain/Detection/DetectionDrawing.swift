/// Draws detections onto a copy of a photo, for people who would rather look than read: each box
/// as a rectangle whose colour runs from red (score 0.5) to green (score 1), its 5 landmarks as
/// small squares (eyes blue, nose yellow, mouth magenta). Not the encoding of the result (the CLI
/// writes JPEG) and not where the detections come from (FaceDetector).
package enum DetectionDrawing {
    /// `photo` (turned to RGB) with `detections` drawn; lines scale with the photo's size.
    /// `colours`, one per detection, replaces the score's colour (the admin page colours by decision).
    package static func draw(
        _ detections: [Detection], on photo: Image, colours: [(UInt8, UInt8, UInt8)]? = nil
    ) -> Image {
        precondition(colours == nil || colours!.count == detections.count, "one colour per detection")
        let rgb = photo.channels == 3 ? photo : photo.converted(channels: 3)
        var pixels = rgb.pixels
        let (width, height) = (rgb.width, rgb.height)
        let thickness = max(2, min(width, height) / 250)
        func fill(_ left: Int, _ top: Int, _ right: Int, _ bottom: Int, _ colour: (UInt8, UInt8, UInt8)) {
            let (x0, y0) = (max(0, left), max(0, top))
            let (x1, y1) = (min(width, right), min(height, bottom))
            guard x0 < x1, y0 < y1 else { return }
            for y in y0..<y1 {
                for x in x0..<x1 {
                    let index = (y * width + x) * 3
                    (pixels[index], pixels[index + 1], pixels[index + 2]) = colour
                }
            }
        }
        let pointColours: [(UInt8, UInt8, UInt8)] = [
            (40, 120, 255), (40, 120, 255), (255, 220, 0), (255, 0, 200), (255, 0, 200),
        ]
        // Worst first, so the best box is drawn on top where boxes cross.
        for index in detections.indices.sorted(by: { detections[$0].score < detections[$1].score }) {
            let detection = detections[index]
            let share = min(max((detection.score - 0.5) * 2, 0), 1)
            let colour =
                colours?[index] ?? (UInt8(255 * (1 - share)), UInt8(200 * share + 55 * (1 - share)), UInt8(40))
            let box = detection.box
            let (left, top) = (Int(box.x.rounded()), Int(box.y.rounded()))
            let (right, bottom) = (Int(box.right.rounded()), Int(box.bottom.rounded()))
            fill(left - thickness, top - thickness, right + thickness, top, colour)
            fill(left - thickness, bottom, right + thickness, bottom + thickness, colour)
            fill(left - thickness, top, left, bottom, colour)
            fill(right, top, right + thickness, bottom, colour)
            let radius = max(1, Int((box.height / 40).rounded()))
            for (point, pointColour) in zip(detection.landmarks, pointColours) {
                let (x, y) = (Int(point.x.rounded()), Int(point.y.rounded()))
                fill(x - radius, y - radius, x + radius + 1, y + radius + 1, pointColour)
            }
        }
        return Image(width: width, height: height, channels: 3, pixels: pixels)
    }
}
