import FaceTrain
import Foundation
import Testing

@testable import FaceTrainServer

/// The OpenAPI document against the router: the same operations both ways, every `$ref` resolves,
/// and docs/openapi.json is the served document. The rule: every (method, path template) the
/// router answers, the admin HTML pages included, is an operation of the document, and nothing
/// else is. `Route.operations` is the router's own list (its `methods` decide the 405s).
@Suite struct OpenAPIDocumentTests {
    static let docsFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/openapi.json")

    static func documentOperations() throws -> Set<String> {
        guard case .object(let document) = OpenAPIDocument.document, case .object(let paths)? = document["paths"] else {
            throw DocumentProblem("the document has no paths")
        }
        var operations = Set<String>()
        for (template, item) in paths {
            guard case .object(let fields) = item else { throw DocumentProblem("\(template) is not an object") }
            for method in fields.keys where method != "parameters" {
                operations.insert("\(method.uppercased()) \(template)")
            }
        }
        return operations
    }

    struct DocumentProblem: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    @Test func theDocumentListsExactlyTheRoutersOperations() throws {
        let router = Set(Route.operations.map { "\($0.method) \($0.template)" })
        let document = try Self.documentOperations()
        #expect(
            router.subtracting(document).isEmpty,
            "routes the router answers but docs do not describe: \(router.subtracting(document).sorted())")
        #expect(
            document.subtracting(router).isEmpty,
            "operations the document describes but the router does not answer: \(document.subtracting(router).sorted())"
        )
        #expect(router.count == Route.operations.count, "a (method, template) is listed twice")
    }

    /// `Route.all` has every kind, and each template, with its placeholders filled, routes back to itself.
    @Test func theRoutersListIsItsOwnRouting() {
        #expect(Set(Route.all.map(\.kind).map { "\($0)" }) == Set(Route.Kind.allCases.map { "\($0)" }))
        for route in Route.all {
            let path = route.template.replacingOccurrences(of: "{id}", with: "3")
                .replacingOccurrences(of: "{version}", with: "1").replacingOccurrences(of: "{job}", with: "1")
                .replacingOccurrences(of: "{sha256}", with: String(repeating: "a", count: 64))
            #expect(Route(path: path)?.template == route.template, "\(path)")
            #expect(!route.methods.isEmpty)
        }
    }

    @Test func everyReferenceResolves() throws {
        guard case .object(let document) = OpenAPIDocument.document,
            case .object(let components)? = document["components"], case .object(let schemas)? = components["schemas"]
        else { throw DocumentProblem("the document has no components.schemas") }
        var references = Set<String>()
        func walk(_ value: JSONValue) {
            switch value {
            case .object(let fields):
                if case .string(let target)? = fields["$ref"] { references.insert(target) }
                fields.values.forEach(walk)
            case .array(let items): items.forEach(walk)
            default: break
            }
        }
        walk(OpenAPIDocument.document)
        let prefix = "#/components/schemas/"
        for reference in references.sorted() {
            #expect(
                reference.hasPrefix(prefix) && schemas[String(reference.dropFirst(prefix.count))] != nil, "\(reference)"
            )
        }
        #expect(
            references.count == schemas.count,
            "unused schemas: \(Set(schemas.keys).subtracting(references.map { String($0.dropFirst(prefix.count)) }))")
    }

    /// `make openapi` (FACETRAIN_WRITE_OPENAPI=1) rewrites the file from the Swift source.
    @Test func docsOpenAPIIsTheServedDocument() throws {
        if ProcessInfo.processInfo.environment["FACETRAIN_WRITE_OPENAPI"] == "1" {
            try OpenAPIDocument.data.write(to: Self.docsFile)
        }
        let file = try Data(contentsOf: Self.docsFile)
        #expect(file == OpenAPIDocument.data, "docs/openapi.json is not the served document; run `make openapi`")
        // Valid JSON that says which version it is.
        let parsed = try JSONSerialization.jsonObject(with: file) as? [String: Any]
        #expect(parsed?["openapi"] as? String == "3.1.0")
    }
}
