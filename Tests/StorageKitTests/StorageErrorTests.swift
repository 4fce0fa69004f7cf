import Foundation
import Testing
import Transport
@testable import StorageKit

/// HTTP answers of the JSON API → StorageError.
@Suite struct StorageErrorTests {
    static func response(_ status: Int, message: String? = nil, reason: String? = nil) -> HTTPResponse {
        guard let message else { return HTTPResponse(status: status) }
        var error: [String: Any] = ["code": status, "message": message]
        if let reason { error["errors"] = [["message": message, "domain": "global", "reason": reason]] }
        let body = try! JSONSerialization.data(withJSONObject: ["error": error])
        return HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: body)
    }

    static func map(_ status: Int, message: String? = nil, reason: String? = nil, object: String? = "a/b.txt") -> StorageError {
        StorageError.from(response: response(status, message: message, reason: reason), bucket: "bkt", object: object)
    }

    @Test(arguments: [
        (400, StorageErrorCode.invalidArgument), (401, .unauthenticated), (403, .unauthorized),
        (404, .objectNotFound), (408, .retryLimitExceeded), (412, .preconditionFailed),
        (429, .quotaExceeded), (500, .retryLimitExceeded), (502, .retryLimitExceeded),
        (503, .retryLimitExceeded), (504, .retryLimitExceeded), (409, .unknown), (416, .unknown), (302, .unknown),
    ])
    func statusMapping(status: Int, code: StorageErrorCode) {
        #expect(Self.map(status, message: "server says \(status)").code == code)
        #expect(Self.map(status).code == code, "also without a body")
    }

    @Test func notFound() {
        guard case .objectNotFound(let path) = Self.map(404, message: "No such object: bkt/a/b.txt") else {
            Issue.record("expected objectNotFound")
            return
        }
        #expect(path == "a/b.txt")
        guard case .bucketNotFound(let bucket) = Self.map(404, message: "Not Found", object: nil) else {
            Issue.record("expected bucketNotFound for a bucket-level request")
            return
        }
        #expect(bucket == "bkt")
        // An object request into a bucket that does not exist.
        #expect(Self.map(404, message: "The specified bucket does not exist.", reason: "notFound").code == .bucketNotFound)
        #expect(Self.map(404, message: "No such object: bkt/the bucket does not exist").code == .objectNotFound)
    }

    /// The 404 bodies each server sends, with bucket names that contain
    /// "bucket", so that a message quoting a name reads like one about a
    /// missing bucket.
    static func notFoundBody(_ text: String) -> HTTPResponse {
        HTTPResponse(status: 404, headers: HTTPHeaders([("Content-Type", "application/json")]), body: Data(text.utf8))
    }

    static let notFoundAnswers: [(server: String, missingObject: String, missingBucket: String)] = [
        // GCS (https://cloud.google.com/storage/docs/json_api/v1/status-codes):
        // reason notFound for both; the missing bucket has a fixed sentence.
        ("GCS",
         #"{"error":{"code":404,"message":"No such object: my-bucket/the bucket does not exist","errors":[{"message":"No such object: my-bucket/the bucket does not exist","domain":"global","reason":"notFound"}]}}"#,
         #"{"error":{"code":404,"message":"The specified bucket does not exist.","errors":[{"message":"The specified bucket does not exist.","domain":"global","reason":"notFound"}]}}"#),
        // storage-testbench (googleapis/storage-testbench, testbench/error.py).
        ("storage-testbench",
         #"{"error":{"code":404,"message":"Live version of object tb-bucket/cf/ does not exist.","errors":[{"domain":"global","message":"Live version of object tb-bucket/cf/ does not exist.","reason":"notFound"}]}}"#,
         #"{"error":{"code":404,"message":"Bucket tb-bucket does not exist.","errors":[{"domain":"global","message":"Bucket tb-bucket does not exist.","reason":"notFound"}]}}"#),
        // fake-gcs-server: the same body for a missing bucket and object.
        ("fake-gcs-server",
         #"{"error":{"code":404,"message":"Not Found","errors":[{"domain":"global","reason":"Not Found","message":"Not Found"}]}}"#,
         #"{"error":{"code":404,"message":"Not Found","errors":[{"domain":"global","reason":"Not Found","message":"Not Found"}]}}"#),
        // gcp-storage-emulator: an empty body, or (batch, delete) a message
        // naming object and bucket.
        ("gcp-storage-emulator",
         #"{"error":{"code":404,"message":"Object with name 'a' does not exist in bucket 'test-bucket'","errors":[{"domain":"global","reason":"notFound","message":"Object with name 'a' does not exist in bucket 'test-bucket'"}]}}"#,
         ""),
    ]

    @Test func notFoundIsClassifiedByTheCallNotByTheWording() {
        for answer in Self.notFoundAnswers {
            let onObject = StorageError.from(
                response: Self.notFoundBody(answer.missingObject), bucket: "tb-bucket", object: "cf/")
            #expect(onObject.code == .objectNotFound, "\(answer.server): a missing object")
            for body in [answer.missingObject, answer.missingBucket] {
                let onBucket = StorageError.from(response: Self.notFoundBody(body), bucket: "tb-bucket", object: nil)
                #expect(onBucket.code == .bucketNotFound, "\(answer.server): a bucket call answered \(body)")
            }
        }
        // Only GCS says that an object call failed for want of a bucket.
        let gcs = Self.notFoundAnswers[0]
        #expect(StorageError.from(response: Self.notFoundBody(gcs.missingBucket), bucket: "b", object: "o").code == .bucketNotFound)
    }

    @Test func forbiddenInTheUsageLimitsDomainIsQuotaExceeded() {
        let body = #"{"error":{"code":403,"message":"bucket over its limit","errors":[{"domain":"usageLimits","reason":"someNewLimit","message":"x"}]}}"#
        let response = HTTPResponse(status: 403, body: Data(body.utf8))
        #expect(StorageError.from(response: response, bucket: "b", object: "o").code == .quotaExceeded)
    }

    @Test func forbiddenForQuotaReasonsIsQuotaExceeded() {
        #expect(Self.map(403, message: "Rate limit", reason: "rateLimitExceeded").code == .quotaExceeded)
        #expect(Self.map(403, message: "denied", reason: "forbidden").code == .unauthorized)
    }

    @Test func serverMessagesAreKept() {
        let error = Self.map(400, message: "Invalid argument: maxResults")
        #expect(error.description.contains("Invalid argument: maxResults"))
        let unknown = Self.map(409, message: "Conflict here")
        guard case .unknown(let message, let response) = unknown else {
            Issue.record("expected unknown")
            return
        }
        #expect(message.contains("Conflict here"))
        #expect(response?.status == 409)
        #expect(response?.message == "Conflict here")
        #expect(unknown.serverResponse?.bodyText.contains("Conflict here") == true)
        let forbidden = Self.map(403, message: "x@y.iam.gserviceaccount.com does not have storage.objects.get access")
        #expect(forbidden.description.contains("storage.objects.get"))
        #expect(forbidden.description.contains("gs://bkt/a/b.txt"))
    }

    @Test func plainTextBodies() {
        let response = HTTPResponse(status: 502, body: Data("Bad Gateway\n".utf8))
        let error = StorageError.from(response: response, bucket: "b", object: nil)
        #expect(error.code == .retryLimitExceeded)
        #expect(error.description.contains("Bad Gateway"))
        let server = ServerResponse(HTTPResponse(status: 500, body: Data(String(repeating: "x", count: 10000).utf8)))
        #expect(server.bodyText.count == ServerResponse.maxBodyText)
    }

    @Test func firebaseCodes() {
        #expect(StorageErrorCode.unknown.rawValue == -13000)
        #expect(StorageErrorCode.objectNotFound.rawValue == -13010)
        #expect(StorageErrorCode.bucketNotFound.rawValue == -13011)
        #expect(StorageErrorCode.projectNotFound.rawValue == -13012)
        #expect(StorageErrorCode.quotaExceeded.rawValue == -13013)
        #expect(StorageErrorCode.unauthenticated.rawValue == -13020)
        #expect(StorageErrorCode.unauthorized.rawValue == -13021)
        #expect(StorageErrorCode.retryLimitExceeded.rawValue == -13030)
        #expect(StorageErrorCode.nonMatchingChecksum.rawValue == -13031)
        #expect(StorageErrorCode.downloadSizeExceeded.rawValue == -13032)
        #expect(StorageErrorCode.cancelled.rawValue == -13040)
        #expect(StorageErrorCode.invalidArgument.rawValue == -13050)
        #expect(StorageError.cancelled.errorCode == -13040)
        #expect(StorageError.downloadSizeExceeded(total: 10, maxSize: 5).errorCode == -13032)
        #expect(StorageError.nonMatchingChecksum.code == .nonMatchingChecksum)
        #expect(StorageError.errorDomain == "FIRStorageErrorDomain")
        let ns = StorageError.objectNotFound("x") as NSError
        #expect(ns.code == -13010)
        #expect(ns.domain == "FIRStorageErrorDomain")
    }

    @Test func descriptionsNeverShowCredentials() {
        let leaky = Self.map(401, message: "Invalid Credentials; Authorization: Bearer ya29.a0AfB_secret-token")
        #expect(!leaky.description.contains("ya29"))
        #expect(!leaky.localizedDescription.contains("ya29"))
        let query = Self.map(400, message: "bad url https://x/o?access_token=ya29.secret&alt=media")
        #expect(!query.description.contains("ya29"))
        #expect(query.description.contains("alt=media"))
        let json = StorageError.unknown(message: #"{"access_token": "ya29.secret", "expires_in": 3599}"#, response: nil)
        #expect(!json.description.contains("ya29"))
        #expect(json.description.contains("expires_in"))
        let plain = StorageError.invalidArgument("maxResults must be between 1 and 1000")
        #expect(plain.description == "invalid argument: maxResults must be between 1 and 1000")
    }

    /// Credentials go, wherever they stand: after Bearer/Firebase (when
    /// token-shaped), in an Authorization header, as JWTs and ya29. tokens.
    @Test(arguments: [
        "Authorization: Bearer ya29.a0AfB_hX9k-secret",
        "bearer ya29.a0AfB_hX9k-secret was refused",
        "token ya29.a0AfB_hX9k-secret expired",
        "Firebase eyJhbGciOiJSUzI1NiJ9.eyJ1aWQiOiJ1In0.c2lnbmF0dXJl refused",
        "sent Firebase AMf-vBxQ3k9Zl2_secret1234567890abcdef as the refresh token",
        "header authorization=Firebase whatever-it-is-secret",
        "Bearer 4/0AX4XfWh_secret_secret_secret",
    ])
    func credentialsAreRedacted(_ text: String) {
        let redacted = StorageError.redact(text)
        #expect(!redacted.contains("secret") && !redacted.contains("eyJ") && !redacted.contains("ya29"), "\(redacted)")
        #expect(redacted.contains("<redacted>"), "\(redacted)")
    }

    /// Ordinary prose naming the products stays as it was written.
    @Test(arguments: [
        "a/b: generation is 3, not 2 (checked by reading first: Firebase Storage has no preconditions)",
        "Firebase Storage answered 403: Permission denied.",
        "the bearer token was refused; sign in again",
        "Firebase Authentication is not reachable at 127.0.0.1:1",
        "firebase rules refused users/abc/def",
    ])
    func proseIsKept(_ text: String) {
        #expect(StorageError.redact(text) == text)
    }

    @Test func everyCaseDescribesItself() {
        let all: [StorageError] = [
            .unknown(message: "m", response: nil), .objectNotFound("o"), .bucketNotFound("b"),
            .quotaExceeded("q"), .unauthenticated("u"), .unauthorized("z"), .retryLimitExceeded("r"),
            .nonMatchingChecksum, .downloadSizeExceeded(total: 2, maxSize: 1), .cancelled,
            .invalidArgument("i"), .preconditionFailed("p"),
        ]
        #expect(Set(all.map(\.code)).count == all.count)
        for error in all {
            #expect(!error.description.isEmpty)
            #expect(error.errorDescription == error.description)
        }
    }
}
