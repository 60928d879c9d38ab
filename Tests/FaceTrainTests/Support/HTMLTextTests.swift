import Testing

@testable import FaceTrain

/// The one HTML escaper every page uses (eval report, base report, admin page).
@Suite struct HTMLTextTests {
    @Test func theFiveMarkupCharactersBecomeEntities() {
        #expect(
            HTMLText.escape("<a href=\"x\" title='y'>&</a>")
                == "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;")
    }

    @Test func otherTextIsLeftAsItIs() {
        #expect(HTMLText.escape("O Brien, Søn 🙂 #7; 100 %") == "O Brien, Søn 🙂 #7; 100 %")
        #expect(HTMLText.escape("") == "")
    }

    /// An entity that is already there is escaped again: the text is shown, never read as markup.
    @Test func anEntityInTheTextIsShownAsWritten() {
        #expect(HTMLText.escape("&amp;") == "&amp;amp;")
    }

    /// A quote or bracket followed by a combining mark is one Swift `Character`, but a browser
    /// still reads the quote or bracket on its own.
    @Test func aQuoteCarryingACombiningMarkIsStillEscaped() {
        #expect(HTMLText.escape("x\"\u{301} onmouseover=y") == "x&quot;\u{301} onmouseover=y")
        #expect(HTMLText.escape("'\u{301}") == "&#39;\u{301}")
        #expect(HTMLText.escape("<\u{338}") == "&lt;\u{338}")
    }
}
