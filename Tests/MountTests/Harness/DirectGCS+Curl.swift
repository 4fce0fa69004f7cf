import Foundation
import TestServerClient
import TestSupport

extension DirectGCS {
    /// Media upload of a file with curl (streams it from disk).
    func putFile(_ name: String, path: String) async throws {
        let url = "\(base)/upload/storage/v1/b/\(bucket)/o?uploadType=media&name=\(Self.encode(name))"
        let result = try await Tools.run("/usr/bin/curl", [
            "-sS", "--fail-with-body", "-X", "POST", "-H", "Content-Type: application/octet-stream",
            "-H", "Expect:", "-T", path, "-o", "/dev/null", "-w", "%{http_code}", url,
        ], timeout: .seconds(300))
        guard result.ok, result.out == "200" else { throw HarnessError("curl upload of \(name): \(result.summary) \(result.out)") }
    }
}
