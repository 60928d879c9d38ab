import Foundation
import Testing

@testable import FaceTrain

/// A base's `report.html` says what the base is: its extractor, what part of the input it sees,
/// its recipe and its verification figures, all from the manifest.
@Suite struct BaseReportTests {
    @Test func theReportNamesTheExtractorItsInputCropRecipeAndVerification() throws {
        let manifest = try BaseModel.builtin().manifest
        let html = BaseReport.html(manifest)
        let input = manifest.definition.input
        #expect(
            html.contains(
                "\(manifest.architecture), width \(manifest.width), \(manifest.embeddingFeatures)-d embedding"))
        #expect(input.crop > 0, "the builtin base has an input crop")
        #expect(
            html.contains(
                "\(input.width)x\(input.height) px, of which the extractor sees the central "
                    + "\(input.networkWidth)x\(input.networkHeight) (\(input.crop) px cut from every edge)"))
        #expect(html.contains("\(manifest.recipe.epochs) epochs, seed \(manifest.recipe.seed)"))
        #expect(html.contains(String(format: "%.3f", manifest.verification.pairAccuracy)))
        #expect(html.contains("teacher dlib_descriptors.h5 (feature, weight 20"))

        // A recipe recorded before the loss could be chosen (v1's) distilled relationally.
        var older = manifest
        older.recipe.teacherLoss = nil
        #expect(BaseReport.html(older).contains("teacher dlib_descriptors.h5 (relational, weight 20"))

        // Manifest text (a foreign base's teacher file name) is escaped, not markup.
        var foreign = manifest
        foreign.recipe.teacher = "<script>x</script>.h5"
        let foreignHTML = BaseReport.html(foreign)
        #expect(!foreignHTML.contains("<script>") && foreignHTML.contains("&lt;script&gt;x&lt;/script&gt;.h5"))
        foreign.recipe.teacher = "\"quoted\" 'teacher'.h5"
        #expect(BaseReport.html(foreign).contains("teacher &quot;quoted&quot; &#39;teacher&#39;.h5 ("))

        var whole = manifest
        whole.definition.input = input.cropping(0)
        whole.recipe.teacher = nil
        let wholeHTML = BaseReport.html(whole)
        #expect(wholeHTML.contains("\(input.networkWidth)x\(input.networkHeight) px, the whole crop"))
        #expect(!wholeHTML.contains("teacher dlib"))
    }
}
