import Foundation
import Logging
import Transport

/// A Google credentials JSON file of any supported `type`.
public enum CredentialsFile {
    /// Reads the file at `path` and builds the provider its `type` names:
    /// `service_account`, `authorized_user`, `external_account` or
    /// `impersonated_service_account`.
    public static func load(_ path: String, transport: HTTPTransport = .shared) throws(CredentialsError) -> any CredentialsProvider {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadableFile(path: path, reason: CredentialsError.reason(error))
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw .invalidKeyFile(path: path, reason: "not a JSON object")
        }
        return try provider(object, source: path, transport: transport)
    }

    static func provider(_ object: [String: Any], source: String, transport: HTTPTransport) throws(CredentialsError) -> any CredentialsProvider {
        let type = try Fields(object, source: source).required("type")
        switch type {
        case "service_account":
            let key = try ServiceAccountKey(json: JSONSerialization.dataIgnoringErrors(object), source: source)
            return ServiceAccountCredentials(key: key, transport: transport)
        case "authorized_user":
            return try AuthorizedUserCredentials(json: object, source: source, transport: transport)
        case "external_account":
            return try ExternalAccountCredentials(json: object, source: source, transport: transport)
        case "impersonated_service_account":
            // https://google.aip.dev/auth/4119 (what gcloud writes for
            // `auth application-default login --impersonate-service-account`).
            let fields = Fields(object, source: source)
            guard let sourceObject = object["source_credentials"] as? [String: Any] else {
                throw .invalidKeyFile(path: source, reason: "missing source_credentials")
            }
            let inner = try provider(sourceObject, source: "\(source) (source_credentials)", transport: transport)
            return ImpersonatedCredentials(
                url: try fields.required("service_account_impersonation_url"), source: inner,
                delegates: object["delegates"] as? [String] ?? [],
                quotaProject: fields.optional("quota_project_id"), transport: transport)
        default:
            throw .invalidKeyFile(
                path: source,
                reason: "type is \"\(type)\"; supported: service_account, authorized_user, external_account, impersonated_service_account")
        }
    }

    /// String fields of a credentials file, with errors that name the file.
    struct Fields {
        let object: [String: Any]
        let source: String

        init(_ object: [String: Any], source: String) {
            self.object = object
            self.source = source
        }

        func required(_ name: String) throws(CredentialsError) -> String {
            guard let value = optional(name) else { throw .invalidKeyFile(path: source, reason: "missing \(name)") }
            return value
        }

        func optional(_ name: String) -> String? {
            (object[name] as? String).flatMap { $0.isEmpty ? nil : $0 }
        }
    }
}

extension JSONSerialization {
    /// Re-serialises an object that came from JSON (so cannot fail).
    static func dataIgnoringErrors(_ object: [String: Any]) -> Data {
        (try? data(withJSONObject: object)) ?? Data()
    }
}

extension Credentials {
    /// The name Google's libraries use for the metadata server when
    /// `GCE_METADATA_HOST` is not set.
    public static let metadataServerName = "metadata.google.internal"

    /// gcloud's well-known file: `$CLOUDSDK_CONFIG` or `~/.config/gcloud`,
    /// then `application_default_credentials.json`. Nil without either
    /// variable (HOME is read from `environment`, so tests stay hermetic).
    public static func wellKnownFile(_ environment: [String: String]) -> String? {
        let directory: String
        if let config = environment["CLOUDSDK_CONFIG"], !config.isEmpty {
            directory = config
        } else if let home = environment["HOME"], !home.isEmpty {
            directory = home + "/.config/gcloud"
        } else {
            return nil
        }
        return directory + "/application_default_credentials.json"
    }

    /// True when `NO_GCE_CHECK` asks not to look for a metadata server.
    static func skipsMetadataProbe(_ environment: [String: String]) -> Bool {
        ["true", "1", "yes"].contains(environment["NO_GCE_CHECK"]?.lowercased() ?? "")
    }
}

/// The metadata server at `metadata.google.internal`, the last step of the
/// ADC order, reached only when nothing else was found. Before its first
/// token it is probed once, with a short timeout and no retries, as
/// Google's libraries do; if it does not answer, the error lists every
/// place that was tried.
final class ProbedMetadataCredentials: CredentialsProvider, CustomStringConvertible {
    let tried: [String]
    private let metadata: MetadataServerCredentials
    private let probe: HTTPTransport
    private let probed = ProbeState()

    init(host: String, tried: [String], transport: HTTPTransport) {
        self.tried = tried
        self.metadata = MetadataServerCredentials(host: host, transport: transport)
        self.probe = HTTPTransport(configuration: TransportConfiguration(connectTimeout: .milliseconds(500), retry: .none))
    }

    func authorizationHeader() async throws -> String? {
        if await !probed.answered {
            let url = "http://\(metadata.host)/computeMetadata/v1/"
            let response = try? await probe.send(HTTPRequest(
                method: .get, url: url, headers: ["Metadata-Flavor": "Google"], isIdempotent: true))
            guard let response, response.headers["Metadata-Flavor"] == "Google" else {
                throw CredentialsError.noCredentials(tried: tried + ["metadata server \(metadata.host): no answer"])
            }
            await probed.markAnswered()
        }
        return try await metadata.authorizationHeader()
    }

    func invalidate() async { await metadata.invalidate() }

    var identity: String { metadata.identity }

    var description: String { metadata.description }

    private actor ProbeState {
        var answered = false
        func markAnswered() { answered = true }
    }
}
