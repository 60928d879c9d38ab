import FaceTrain
import Foundation

/// The OpenAPI 3.1 description of every route of `facetrain serve`, served at `GET /openapi.json`:
/// the one place that defines it. `docs/openapi.json` is this document written out (`make openapi`;
/// OpenAPIDocumentTests fails when the file differs), and the same tests check that it names exactly
/// the operations of `Route.operations`. It describes; it does not validate requests (the routes do).
/// The admin HTML pages are in it too, briefly, under the tag `admin page`.
enum OpenAPIDocument {
    /// The document as served: pretty, sorted keys, one newline at the end.
    static let data: Data = (try? JSONText.data(document)).map { $0 + Data("\n".utf8) } ?? Data("{}\n".utf8)

    static var document: JSONValue {
        [
            "openapi": "3.1.0",
            "info": [
                "title": "facetrain serve",
                "version": .string(FaceTrainVersion.string),
                "description": .string(
                    "The HTTP API the iPhone app talks to: register people, upload face crops, train, download "
                        + "the published Core ML model, recognise and verify faces. Every answer but a file is JSON; "
                        + "an error is {\"status\": \"error\", \"error\": \"what went wrong and what to do\"}. Any "
                        + "route may also answer 403 (a write from another site's page, or a non-loopback Host "
                        + "without a token), 413 (a body over the limits), 408 (a body too slow) and 429 (too many "
                        + "wrong tokens from one address, with Retry-After). docs/serve.md explains each route."),
            ],
            "servers": [["url": "http://127.0.0.1:8080", "description": "facetrain serve's default --listen"]],
            "security": [["bearerAuth": []]],
            "tags": [
                ["name": "people", "description": "Registered people and their crops"],
                ["name": "classes", "description": "Crops of class 2 (strangers) and class 1 (not a face)"],
                ["name": "recognition", "description": "Who is in a photo, and corrections"],
                ["name": "training", "description": "Trainings and their progress"],
                ["name": "tokens", "description": "Scoped, revocable tokens (roles admin, enrol, app)"],
                ["name": "models", "description": "The published model and its files"],
                ["name": "operations", "description": "Health, metrics and this document"],
                ["name": "admin", "description": "The HTML admin page (a browser's session cookie)"],
            ],
            "paths": .object(paths),
            "components": [
                "securitySchemes": [
                    "bearerAuth": [
                        "type": "http", "scheme": "bearer",
                        "description": .string(
                            "The token of the server's --token-file. Without --token-file (loopback only) "
                                + "no route needs one."),
                    ],
                    "adminSession": [
                        "type": "apiKey", "in": "cookie", "name": .string(ServerRoutes.sessionCookie),
                        "description": "The session cookie POST /login sets; it opens the admin pages only.",
                    ],
                ],
                "schemas": .object(schemas),
            ],
        ]
    }

    // MARK: Building blocks

    static func ref(_ name: String) -> JSONValue { ["$ref": .string("#/components/schemas/\(name)")] }

    /// An object with exactly these properties: a field the server adds without documenting it
    /// fails schemathesis's schema check. `closed: false` for the error, which some answers extend.
    static func object(_ properties: [String: JSONValue], required: [String], closed: Bool = true) -> JSONValue {
        [
            "type": "object", "properties": .object(properties), "required": .array(required.map { .string($0) }),
            "additionalProperties": .bool(!closed),
        ]
    }

    /// A JSON success answer: `status` "success" beside `properties`.
    static func success(_ properties: [String: JSONValue], required: [String]) -> JSONValue {
        var all = properties
        all["status"] = ["const": "success"]
        return object(all, required: ["status"] + required)
    }

    static func json(_ description: String, _ schema: JSONValue, headers: [String: JSONValue] = [:]) -> JSONValue {
        var answer: JSONValue = [
            "description": .string(description), "content": ["application/json": ["schema": schema]],
        ]
        if !headers.isEmpty, case .object(var fields) = answer {
            fields["headers"] = .object(headers)
            answer = .object(fields)
        }
        return answer
    }

    static func failure(_ description: String) -> JSONValue { json(description, ref("Error")) }

    static func body(_ type: String, _ description: String, schema: JSONValue = ["type": "string"]) -> JSONValue {
        ["description": .string(description), "content": [type: ["schema": schema]]]
    }

    static let unauthorized = failure("The token is missing or wrong (WWW-Authenticate: Bearer)")
    static let html = body("text/html", "An HTML page")
    static let nullableInteger: JSONValue = ["type": ["integer", "null"]]
    static let nullableString: JSONValue = ["type": ["string", "null"]]
    static let sha256Schema: JSONValue = ["type": "string", "pattern": "^[0-9a-f]{64}$"]

    static func path(_ name: String, _ schema: JSONValue, _ description: String) -> JSONValue {
        ["name": .string(name), "in": "path", "required": true, "schema": schema, "description": .string(description)]
    }

    static let userId = path("id", ["type": "integer", "minimum": 1], "A person's id (3 or more; 1 and 2 are classes)")
    static let tokenId = path("id", ["type": "integer", "minimum": 1], "A scoped token's id (GET /v1/tokens)")
    static let version = path("version", ["type": "integer", "minimum": 1], "A model version")
    static let cropHash = path("sha256", sha256Schema, "The crop's SHA-256, 64 lower-case hex digits")
    static let versionQuery: JSONValue = [
        "name": "version", "in": "query", "required": false, "schema": ["type": "integer", "minimum": 1],
        "description": "Another version than the published one",
    ]

    /// One operation; `security` nil keeps the document's (the bearer token).
    static func operation(
        _ id: String, _ summary: String, tag: String, security: JSONValue? = nil, parameters: [JSONValue] = [],
        requestBody: JSONValue? = nil, responses: [String: JSONValue]
    ) -> JSONValue {
        var fields: [String: JSONValue] = [
            "operationId": .string(id), "summary": .string(summary), "tags": [.string(tag)],
            "responses": .object(
                responses.merging(["default": failure("Any other refusal (see the description)")]) {
                    first, _ in first
                }),
        ]
        if let security { fields["security"] = security }
        if !parameters.isEmpty { fields["parameters"] = .array(parameters) }
        if let requestBody { fields["requestBody"] = requestBody }
        return .object(fields)
    }

    /// Open unless the server runs with --private (then the token or the admin session).
    static let readSecurity: JSONValue = [[:], ["bearerAuth": []], ["adminSession": []]]
    static let adminSecurity: JSONValue = [["bearerAuth": []], ["adminSession": []]]
    static let cookieSecurity: JSONValue = [["adminSession": []]]
    static let open: JSONValue = []

    static func multipart(_ field: String, many: Bool, _ description: String) -> JSONValue {
        let file: JSONValue = ["type": "string", "contentMediaType": "application/octet-stream"]
        return [
            "required": true, "description": .string(description),
            "content": [
                "multipart/form-data": [
                    "schema": object(
                        [field: many ? ["type": "array", "items": file, "minItems": 1] : file],
                        required: [field], closed: false)
                ]
            ],
        ]
    }

    static func jsonBody(_ schema: JSONValue) -> JSONValue {
        ["required": true, "content": ["application/json": ["schema": schema]]]
    }
}

// MARK: - Paths

extension OpenAPIDocument {
    static var paths: [String: JSONValue] {
        var paths = [String: JSONValue]()
        func add(_ template: String, _ method: String, _ operation: JSONValue) {
            guard case .object(var item) = paths[template] ?? [:] else { return }
            item[method.lowercased()] = operation
            paths[template] = .object(item)
        }
        for (template, method, operation) in peopleOperations + classOperations + recognitionOperations
            + trainingOperations + modelOperations + operationsOperations + adminOperations + tokenOperations
        {
            add(template, method, operation)
        }
        // Path parameters belong to the path, so every method of it shares them.
        for (template, item) in paths {
            var parameters = [JSONValue]()
            if template.contains("{id}") { parameters.append(template.hasPrefix("/v1/tokens") ? tokenId : userId) }
            if template.contains("{version}") { parameters.append(version) }
            if template.contains("{sha256}") { parameters.append(cropHash) }
            if template.contains("{job}") {
                parameters.append(path("job", ["type": "integer", "minimum": 1], "A training job's number"))
            }
            guard !parameters.isEmpty, case .object(var fields) = item else { continue }
            fields["parameters"] = .array(parameters)
            paths[template] = .object(fields)
        }
        return paths
    }

    typealias Operation = (template: String, method: String, operation: JSONValue)

    static let userBody: JSONValue = [
        "type": "object", "additionalProperties": false,
        "properties": [
            "name": ["type": "string", "minLength": 1, "maxLength": 200],
            "position": ["type": ["string", "null"], "maxLength": 200],
        ],
    ]

    static var peopleOperations: [Operation] {
        let noUser = failure("No such person")
        var create = userBody
        var change = userBody
        if case .object(var fields) = create {
            fields["required"] = ["name"]
            create = .object(fields)
        }
        if case .object(var fields) = change {
            fields["minProperties"] = 1
            change = .object(fields)
        }
        return [
            (
                "/v1/users", "GET",
                operation(
                    "listUsers", "The people with their crop counts", tag: "people",
                    responses: [
                        "200": json(
                            "The people",
                            success(["users": ["type": "array", "items": ref("User")]], required: ["users"])),
                        "401": unauthorized,
                    ])
            ),
            (
                "/v1/users", "POST",
                operation(
                    "createUser", "Registers a person (ids start at 3 and are never given out twice)", tag: "people",
                    requestBody: jsonBody(create),
                    responses: [
                        "201": json(
                            "Registered",
                            success(["id": ["type": "integer"], "user": ref("User")], required: ["id", "user"])),
                        "400": failure("Not a JSON object, an unknown field, or a name or position data check refuses"),
                        "401": unauthorized,
                    ])
            ),
            (
                "/v1/users/{id}", "GET",
                operation(
                    "getUser", "One person", tag: "people",
                    responses: [
                        "200": json("The person", success(["user": ref("User")], required: ["user"])),
                        "401": unauthorized, "404": noUser,
                    ])
            ),
            (
                "/v1/users/{id}", "PATCH",
                operation(
                    "updateUser", "Changes a person's name and/or position (null clears it)", tag: "people",
                    requestBody: jsonBody(change),
                    responses: [
                        "200": json("Changed", success(["user": ref("User")], required: ["user"])),
                        "400": failure("Nothing to change, an unknown field, or a value data check refuses"),
                        "401": unauthorized, "404": noUser,
                    ])
            ),
            (
                "/v1/users/{id}", "DELETE",
                operation(
                    "deleteUser", "Erases the person everywhere and withdraws every version trained on them",
                    tag: "people",
                    responses: [
                        "200": json(
                            "Erased",
                            success(
                                [
                                    "deleted": ["type": "integer"], "erasure": ref("Erasure"),
                                    "training": nullableInteger, "note": ["type": "string"],
                                ], required: ["deleted", "erasure", "training", "note"])),
                        "401": unauthorized, "404": noUser,
                    ])
            ),
        ] + cropOperations("/v1/users/{id}", tag: "people", owner: "the person")
            + [
                (
                    "/v1/users/{id}/verify", "POST",
                    operation(
                        "verifyUser", "Is the largest face in the photo this person?", tag: "recognition",
                        parameters: [versionQuery],
                        requestBody: multipart("photo", many: false, "One photo or crop"),
                        responses: [
                            "200": json(
                                "The app's decision for this person",
                                success(
                                    [
                                        "user": ["type": "integer"], "version": ["type": "integer"],
                                        "verified": ["type": "boolean"], "threshold": ["type": "number"],
                                        "probability": ["type": ["number", "null"]], "face": ref("Face"),
                                        "note": ["type": "string"],
                                    ], required: ["user", "version", "verified", "threshold", "probability", "face"])),
                            "400": failure("Not exactly one file in the field 'photo', or a bad ?version"),
                            "401": unauthorized,
                            "404": failure("No such person, nothing published, or no such version"),
                            "415": failure("Not multipart/form-data"),
                            "422": failure("Not an image, or no face in it"),
                        ])
                )
            ]
    }

    /// Upload, list, read and delete of one owner's crops (a person, or class 2 or 1).
    static func cropOperations(_ prefix: String, tag: String, owner: String) -> [Operation] {
        let name = prefix.hasPrefix("/v1/users") ? "User" : (prefix.contains("strangers") ? "Stranger" : "NonFace")
        let missing = failure("No such person or crop")
        return [
            (
                prefix + "/photos", "POST",
                operation(
                    "upload\(name)Photos", "Uploads crops of \(owner), each checked as data check would",
                    tag: tag, requestBody: multipart("photos", many: true, "One 'photos' file per crop"),
                    responses: [
                        "201": json("At least one file was stored", ref("UploadResult")),
                        "200": json("Only duplicates", ref("UploadResult")),
                        "422": json("None could be stored (files[].reason says why)", ref("UploadResult")),
                        "400": failure("A file in another field, or no file"), "401": unauthorized,
                        "404": failure("No such person"), "409": failure("More crops than --max-crops"),
                        "415": failure("Not multipart/form-data"),
                    ])
            ),
            (
                prefix + "/photos", "GET",
                operation(
                    "list\(name)Photos", "The crops of \(owner), oldest first", tag: tag,
                    responses: [
                        "200": json(
                            "The crops",
                            success(
                                [
                                    "user": ["type": "integer"], "class": ["type": "integer"],
                                    "photos": ["type": "array", "items": ref("Crop")],
                                ], required: ["photos"])),
                        "401": unauthorized, "404": failure("No such person"),
                    ])
            ),
            (
                prefix + "/photos/{sha256}", "GET",
                operation(
                    "get\(name)Photo", "A crop's bytes as stored", tag: tag,
                    responses: [
                        "200": [
                            "description": "The crop (ETag: its SHA-256)",
                            "content": [
                                "image/jpeg": ["schema": ["type": "string"]],
                                "image/png": ["schema": ["type": "string"]],
                                "image/x-portable-anymap": ["schema": ["type": "string"]],
                            ],
                        ],
                        "401": unauthorized, "404": missing,
                    ])
            ),
            (
                prefix + "/photos/{sha256}", "DELETE",
                operation(
                    "delete\(name)Photo", "Removes a crop durably", tag: tag,
                    responses: [
                        "200": json(
                            "Deleted",
                            success(
                                ["deleted": sha256Schema, "crops": ["type": "integer"]], required: ["deleted", "crops"])
                        ),
                        "401": unauthorized, "404": missing,
                    ])
            ),
        ]
    }

    static var classOperations: [Operation] {
        cropOperations("/v1/strangers", tag: "classes", owner: "class 2 (people who are not registered)")
            + cropOperations("/v1/non-faces", tag: "classes", owner: "class 1 (not a face; no face check)")
    }

    static var recognitionOperations: [Operation] {
        let correction: JSONValue = [
            "type": "object", "additionalProperties": false, "required": ["crop"],
            "properties": [
                "crop": sha256Schema, "user": ["type": "integer", "minimum": 3],
                "class": ["enum": ["stranger", "not_a_face"]],
            ],
            "oneOf": [["required": ["user"]], ["required": ["class"]]],
        ]
        let corrected = success(
            [
                "correction": ["oneOf": [ref("Correction"), ["type": "null"]]], "file": ref("PhotoOutcome"),
                "crops": ["type": "integer"],
            ],
            required: ["correction", "file", "crops"])
        return [
            (
                "/v1/recognize", "POST",
                operation(
                    "recognize", "Every face in a photo and who it is", tag: "recognition", parameters: [versionQuery],
                    requestBody: multipart("photo", many: false, "One photo or crop"),
                    responses: [
                        "200": json(
                            "The faces, largest first",
                            success(
                                [
                                    "version": ["type": "integer"], "width": ["type": "integer"],
                                    "height": ["type": "integer"], "faces": ["type": "array", "items": ref("Face")],
                                ], required: ["version", "width", "height", "faces"])),
                        "400": failure("Not exactly one file in the field 'photo', or a bad ?version"),
                        "401": unauthorized, "404": failure("Nothing published, or no such version"),
                        "415": failure("Not multipart/form-data"), "422": failure("Not an image"),
                    ])
            ),
            (
                "/v1/recognize/crops/{sha256}", "GET",
                operation(
                    "getRecognizedCrop", "A recently recognised face's crop", tag: "recognition",
                    responses: [
                        "200": body("image/jpeg", "The crop (JPEG)"), "401": unauthorized,
                        "404": failure("No recent recognition returned this crop"),
                    ])
            ),
            (
                "/v1/corrections", "POST",
                operation(
                    "correct", "Files a recognised face under the right person or class", tag: "recognition",
                    requestBody: jsonBody(correction),
                    responses: [
                        "201": json("Filed and logged", corrected),
                        "200": json("Already filed there (correction is null)", corrected),
                        "400": failure("Not {crop, user} or {crop, class}"), "401": unauthorized,
                        "404": failure("No recent recognition returned the crop, or no such person"),
                        "409": failure("More crops than --max-crops"),
                        "422": failure("Another class's crop, or the face check refuses it"),
                    ])
            ),
            (
                "/v1/corrections", "GET",
                operation(
                    "listCorrections", "The corrections, newest first", tag: "recognition",
                    responses: [
                        "200": json(
                            "The corrections",
                            success(
                                ["corrections": ["type": "array", "items": ref("Correction")]],
                                required: ["corrections"])),
                        "401": unauthorized,
                    ])
            ),
        ]
    }

    static var trainingOperations: [Operation] {
        let job = success(["job": ["type": "integer"], "record": ref("TrainingJob")], required: ["job", "record"])
        return [
            (
                "/v1/training", "POST",
                operation(
                    "startTraining", "Queues a training (a job still waiting is returned instead)", tag: "training",
                    responses: [
                        "202": json(
                            "Queued", job,
                            headers: [
                                "Location": [
                                    "required": true, "schema": ["type": "string"], "description": "/v1/training/{job}",
                                ]
                            ]),
                        "401": unauthorized,
                    ])
            ),
            (
                "/v1/training", "GET",
                operation(
                    "listTrainings", "Every training job", tag: "training",
                    responses: [
                        "200": json(
                            "The jobs",
                            success(["jobs": ["type": "array", "items": ref("TrainingJob")]], required: ["jobs"])),
                        "401": unauthorized,
                    ])
            ),
            (
                "/v1/training/{job}", "GET",
                operation(
                    "getTraining", "One training job and its progress", tag: "training",
                    responses: ["200": json("The job", job), "401": unauthorized, "404": failure("No such job")])
            ),
        ]
    }

    static var modelOperations: [Operation] {
        let etag: JSONValue = ["schema": ["type": "string"], "description": "\"<sha256>\" of the file"]
        let ranges: [JSONValue] = [
            [
                "name": "Range", "in": "header", "required": false, "schema": ["type": "string"],
                "description": "One byte range, bytes=first-last",
            ],
            [
                "name": "If-None-Match", "in": "header", "required": false, "schema": ["type": "string"],
                "description": "The ETag the client has: 304 when it is current",
            ],
            [
                "name": "If-Range", "in": "header", "required": false, "schema": ["type": "string"],
                "description": "The range only if the file still has this ETag",
            ],
        ]
        var operations: [Operation] = [
            (
                "/v1/model", "GET",
                operation(
                    "getModel", "What the app needs to update: the published version", tag: "models",
                    security: readSecurity,
                    responses: [
                        "200": json("The published version", ref("ModelInfo")),
                        "404": failure("Nothing is published yet"),
                        "503": json(
                            "The published version was withdrawn by an erasure; a model without the person is coming",
                            [
                                "allOf": [ref("Error")],
                                "properties": ["withdrawn": ["type": "integer"], "training": nullableInteger],
                                "required": ["withdrawn", "training"],
                            ],
                            headers: ["Retry-After": ["required": true, "schema": ["type": "string"]]]),
                        "401": unauthorized,
                    ])
            ),
            (
                "/v1/models", "GET",
                operation(
                    "listModels", "Every version with its date, users, accuracy and problems", tag: "models",
                    security: readSecurity,
                    responses: [
                        "200": json(
                            "The versions",
                            success(
                                ["models": ["type": "array", "items": ref("VersionSummary")]], required: ["models"])),
                        "401": unauthorized,
                    ])
            ),
        ]
        for (file, type) in ServerRoutes.downloads.sorted(by: { $0.key < $1.key }) {
            let name = String(file.prefix { $0 != "." })
            // The manifest is JSON, sent whole; the models are bytes, in ranges too.
            let ranged = type != "application/json"
            let schema: JSONValue = ranged ? ["type": "string"] : ["type": "object"]
            let content: JSONValue = [type: ["schema": schema]]
            let headers: JSONValue = [
                "ETag": etag, "Accept-Ranges": ["schema": ["const": ranged ? "bytes" : "none"]],
            ]
            var answers: [String: JSONValue] = [
                "200": ["description": "The file", "headers": headers, "content": content],
                "304": ["description": "The client's copy (If-None-Match) is current", "headers": headers],
                "401": unauthorized, "404": failure("No such version or file"),
            ]
            if ranged {
                answers["206"] = [
                    "description": "The byte range asked for (Content-Range)", "headers": headers, "content": content,
                ]
                answers["416"] = failure("The range starts past the end (Content-Range: bytes */size)")
            }
            for method in ["GET", "HEAD"] {
                operations.append(
                    (
                        "/v1/models/{version}/\(file)", method,
                        operation(
                            "\(method.lowercased())\(name.prefix(1).uppercased() + name.dropFirst())File",
                            "\(method == "HEAD" ? "The headers of" : "Downloads") a version's \(file)", tag: "models",
                            security: readSecurity, parameters: ranged ? ranges : [ranges[1]],
                            responses: method == "HEAD"
                                ? answers.mapValues {
                                    guard case .object(var fields) = $0 else { return $0 }
                                    fields["content"] = nil
                                    return .object(fields)
                                } : answers)
                    ))
            }
        }
        let published = success(
            [
                "version": ["type": "integer"], "unchanged": ["type": "boolean"],
                "notes": ["type": "array", "items": ["type": "string"]], "latest": ref("LatestPointer"),
            ],
            required: ["version", "unchanged", "notes", "latest"])
        let rolledBack = success(
            ["version": ["type": "integer"], "previousVersion": nullableInteger, "latest": ref("LatestPointer")],
            required: ["version", "previousVersion", "latest"])
        operations += [
            (
                "/v1/models/{version}/publish", "POST",
                operation(
                    "publishModel", "Publishes a version through the gate of facetrain publish", tag: "models",
                    responses: [
                        "200": json("Published", published), "401": unauthorized, "404": failure("No such version"),
                        "409": failure("The gate refused it, or it is older than the published version"),
                    ])
            ),
            (
                "/v1/models/{version}/rollback", "POST",
                operation(
                    "rollbackModel", "Switches back to an earlier, verified version", tag: "models",
                    responses: [
                        "200": json("Rolled back", rolledBack), "401": unauthorized, "404": failure("No such version"),
                        "409": failure("Nothing published, not earlier, or it fails verification"),
                    ])
            ),
            (
                "/v1/models/{version}/\(AdminPage.reportName)", "GET",
                operation(
                    "getModelReport", "The version's evaluation report, made on request", tag: "admin",
                    security: adminSecurity,
                    responses: ["200": html, "401": unauthorized, "404": failure("No such version")])
            ),
        ]
        return operations
    }

    static var operationsOperations: [Operation] {
        [
            (
                "/healthz", "GET",
                operation(
                    "health", "The server's version, published model and running training", tag: "operations",
                    security: open,
                    responses: [
                        "200": json(
                            "Up",
                            success(
                                [
                                    "facetrain": ["type": "string"], "published": nullableInteger,
                                    "training": nullableInteger,
                                ],
                                required: ["facetrain", "published", "training"]))
                    ])
            ),
            (
                "/metrics", "GET",
                operation(
                    "metrics", "Prometheus text format 0.0.4", tag: "operations", security: adminSecurity,
                    responses: ["200": body("text/plain", "The metrics"), "401": unauthorized])
            ),
            (
                "/openapi.json", "GET",
                operation(
                    "openAPI", "This document", tag: "operations", security: open,
                    responses: ["200": json("The OpenAPI 3.1 description", ["type": "object"])])
            ),
        ]
    }

    /// Scoped tokens (admin only): the secret is answered once, at creation.
    static var tokenOperations: [Operation] {
        let token = object(
            [
                "id": ["type": "integer"], "name": ["type": "string"],
                "role": ["type": "string", "enum": ["admin", "enrol", "app"]], "createdAt": ["type": "string"],
                "lastUsedAt": nullableString,
            ], required: ["id", "name", "role", "createdAt", "lastUsedAt"])
        let forbidden = failure("The token's role may not use this route")
        let html: JSONValue = body("text/html", "A page of the admin site")
        return [
            (
                "/v1/tokens", "GET",
                operation(
                    "listTokens", "Every scoped token: name, role, created, last used (never the secret)",
                    tag: "tokens",
                    responses: [
                        "200": json(
                            "The tokens", success(["tokens": ["type": "array", "items": token]], required: ["tokens"])),
                        "401": unauthorized, "403": forbidden,
                    ])
            ),
            (
                "/v1/tokens", "POST",
                operation(
                    "createToken", "Creates a token of a role; its secret is in this answer only", tag: "tokens",
                    requestBody: jsonBody(
                        object(
                            [
                                "name": ["type": "string"],
                                "role": ["type": "string", "enum": ["admin", "enrol", "app"]],
                            ], required: ["name", "role"])),
                    responses: [
                        "201": json(
                            "Created",
                            success(
                                ["token": token, "secret": ["type": "string"], "note": ["type": "string"]],
                                required: ["token", "secret"])),
                        "400": failure("No name, an invalid name or an unknown role"), "401": unauthorized,
                        "403": forbidden, "409": failure("The server runs without --token-file"),
                    ])
            ),
            (
                "/v1/tokens/{id}", "DELETE",
                operation(
                    "revokeToken", "Revokes a token: refused from the next request on", tag: "tokens",
                    responses: [
                        "200": json(
                            "Revoked", success(["revoked": token, "note": ["type": "string"]], required: ["revoked"])),
                        "401": unauthorized, "403": forbidden, "404": failure("No such token"),
                    ])
            ),
            (
                "/tokens", "POST",
                operation(
                    "adminCreateToken", "The admin page's Create form: a page with the secret, once", tag: "admin",
                    security: cookieSecurity,
                    requestBody: form(
                        ["name": ["type": "string"], "role": ["type": "string"]], ["name", "role"]),
                    responses: ["201": html, "401": body("text/html", "The login page")])
            ),
            (
                "/tokens/revoke", "POST",
                operation(
                    "adminRevokeToken", "A Revoke button of the admin page", tag: "admin", security: cookieSecurity,
                    requestBody: form(["id": ["type": "string"]], ["id"]),
                    responses: [
                        "303": ["description": "Back to the admin page (Location: /)"],
                        "401": body("text/html", "The login page"),
                    ])
            ),
        ]
    }

    /// The url-encoded body an admin page's form posts (browsers may add fields: left open).
    static func form(_ fields: [String: JSONValue], _ required: [String]) -> JSONValue {
        [
            "required": true,
            "content": [
                "application/x-www-form-urlencoded": ["schema": object(fields, required: required, closed: false)]
            ],
        ]
    }

    /// The browser's pages: HTML, behind the session cookie of POST /login.
    static var adminOperations: [Operation] {
        let page: [String: JSONValue] = ["200": html, "401": body("text/html", "The login page")]
        let redirect: JSONValue = ["description": "Back to the admin page (Location: /)"]
        return [
            (
                "/", "GET",
                operation("adminPage", "The admin page", tag: "admin", security: cookieSecurity, responses: page)
            ),
            (
                "/", "HEAD",
                operation(
                    "adminPageHead", "The admin page's headers", tag: "admin", security: cookieSecurity,
                    responses: ["200": ["description": "The page's headers"]])
            ),
            (
                "/login", "POST",
                operation(
                    "login", "Sets the session cookie when the field token is the server's", tag: "admin",
                    security: open, requestBody: form(["token": ["type": "string"]], ["token"]),
                    responses: ["303": redirect, "401": body("text/html", "The login page, or a JSON error")])
            ),
            (
                "/logout", "POST",
                operation(
                    "logout", "Clears the session cookie", tag: "admin", security: open, responses: ["303": redirect])
            ),
            (
                "/test-photo", "POST",
                operation(
                    "adminTestPhoto", "The admin page's Test a photo form", tag: "admin", security: cookieSecurity,
                    requestBody: multipart("photo", many: false, "One photo or crop"), responses: page)
            ),
            (
                "/correct", "POST",
                operation(
                    "adminCorrect", "The test page's file-this-face-under form", tag: "admin", security: cookieSecurity,
                    requestBody: form(["crop": sha256Schema, "to": ["type": "string"]], ["crop", "to"]),
                    responses: page.merging(["303": redirect]) { first, _ in first })
            ),
            (
                "/people/{id}", "GET",
                operation("adminPerson", "A person's crops", tag: "admin", security: cookieSecurity, responses: page)
            ),
            (
                "/people/{id}/photos/{sha256}/delete", "POST",
                operation(
                    "adminDeletePhoto", "A Delete button of a person's page", tag: "admin", security: cookieSecurity,
                    responses: page.merging(["303": redirect]) { first, _ in first })
            ),
        ]
    }
}

// MARK: - Schemas

extension OpenAPIDocument {
    static var schemas: [String: JSONValue] {
        let integer: JSONValue = ["type": "integer"]
        let string: JSONValue = ["type": "string"]
        let number: JSONValue = ["type": "number"]
        let boolean: JSONValue = ["type": "boolean"]
        let userEntry = object(
            ["id": integer, "name": string, "position": nullableString], required: ["id", "name", "position"])
        return [
            "Error": object(
                ["status": ["const": "error"], "error": string], required: ["status", "error"], closed: false),
            "User": object(
                ["id": integer, "name": string, "position": nullableString, "crops": integer],
                required: ["id", "name", "position", "crops"]),
            "UserEntry": userEntry,
            "PhotoOutcome": object(
                [
                    "file": string, "result": ["enum": ["stored", "duplicate", "rejected"]], "name": string,
                    "reason": string,
                    "refusal": string, "cropped": boolean,
                ], required: ["file", "result"]),
            "UploadResult": object(
                [
                    "status": ["enum": ["success", "error"]], "stored": integer, "duplicates": integer,
                    "rejected": integer,
                    "crops": integer, "files": ["type": "array", "items": ref("PhotoOutcome")], "error": string,
                ], required: ["status", "stored", "duplicates", "rejected", "crops", "files"]),
            "Crop": object(
                [
                    "sha256": sha256Schema, "name": string, "bytes": integer, "added_at": string, "url": string,
                    "face_score": ["type": ["number", "null"]],
                ], required: ["sha256", "name", "bytes", "added_at", "url", "face_score"]),
            "Erasure": object(
                [
                    "user": integer, "erasedAt": string, "by": string, "crops": integer, "embeddings": integer,
                    "withdrawnVersions": ["type": "array", "items": integer], "unpublishedVersion": integer,
                    "checkpoints": integer, "corrections": integer,
                ],
                required: [
                    "user", "erasedAt", "by", "crops", "embeddings", "withdrawnVersions", "checkpoints", "corrections",
                ]),
            "Correction": object(
                [
                    "correctedAt": string, "crop": sha256Schema, "filedUnder": integer, "version": integer,
                    "decidedUser": integer,
                ],
                required: ["correctedAt", "crop", "filedUnder"]),
            "Face": object(
                [
                    "box": ["type": "array", "items": number, "minItems": 4, "maxItems": 4], "score": number,
                    "landmarks": [
                        "type": "array", "items": ["type": "array", "items": number, "minItems": 2, "maxItems": 2],
                    ],
                    "whole_image": boolean, "label": string, "name": string, "probability": number, "accepted": boolean,
                    "decision": string, "threshold": number,
                    "top": [
                        "type": "array",
                        "items": object(
                            ["label": string, "name": string, "probability": number],
                            required: ["label", "name", "probability"]),
                    ],
                    "crop": object(["sha256": sha256Schema, "url": string], required: ["sha256", "url"]),
                ],
                required: [
                    "box", "score", "landmarks", "whole_image", "label", "name", "probability", "accepted", "decision",
                    "threshold", "top",
                ]),
            "TrainingJob": object(
                [
                    "job": integer, "state": ["enum": ["queued", "running", "succeeded", "failed", "refused"]],
                    "createdAt": string, "startedAt": string, "finishedAt": string, "step": string, "epoch": integer,
                    "epochs": integer, "progress": number, "version": integer, "published": boolean,
                    "userAccuracy": number,
                    "error": string,
                ], required: ["job", "state", "createdAt"]),
            "ModelInfo": success(
                [
                    "version": integer, "url": string, "users": ["type": "array", "items": ref("UserEntry")],
                    "sha256": sha256Schema, "size": integer, "publishedAt": string,
                ], required: ["version", "url", "users", "sha256", "size", "publishedAt"]),
            "LatestPointer": object(
                [
                    "version": integer, "url": string, "users": ["type": "array", "items": ref("UserEntry")],
                    "sha256": sha256Schema,
                    "size": integer, "manifestSHA256": string, "publishedAt": string,
                    "action": ["enum": ["publish", "rollback"]],
                    "previousVersion": integer,
                ], required: ["version", "url", "users", "sha256", "size", "manifestSHA256", "publishedAt", "action"]),
            "VersionSummary": object(
                [
                    "version": integer, "createdAt": string, "users": integer, "userAccuracy": number,
                    "isLatest": boolean,
                    "problems": [
                        "type": "array", "items": object(["file": string, "message": string], required: ["message"]),
                    ],
                ], required: ["version", "isLatest", "problems"]),
        ]
    }
}
