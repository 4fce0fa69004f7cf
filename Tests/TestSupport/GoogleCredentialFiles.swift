import Foundation

/// The Google credential files the tests write (the JSON Google's tools
/// write, https://google.aip.dev/auth/4110 and its siblings), pointing at
/// `Tests/Servers/token_server.py` at `base`; the secrets and names are the
/// ones that server expects by default. Shared by the StorageKit and the
/// mount tests.
public enum GoogleCredentialFiles {
    public static let clientID = "test-client.apps.googleusercontent.com"
    public static let clientSecret = "test-client-secret"
    public static let refreshToken = "1//test-refresh-token"
    public static let subjectToken = "test-subject-token"
    public static let audience = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/test"
    /// The service account impersonated.
    public static let target = "target@bucketfs-test.iam.gserviceaccount.com"

    /// gcloud's `authorized_user` file (`gcloud auth application-default login`).
    public static func authorizedUser(base: String, refreshToken: String = refreshToken, quota: String? = nil) -> [String: Any] {
        var object: [String: Any] = [
            "type": "authorized_user", "client_id": clientID, "client_secret": clientSecret,
            "refresh_token": refreshToken, "token_uri": base + "/token",
        ]
        if let quota { object["quota_project_id"] = quota }
        return object
    }

    /// IAM credentials' `generateAccessToken` for `target`.
    public static func impersonationURL(base: String) -> String {
        "\(base)/v1/projects/-/serviceAccounts/\(target):generateAccessToken"
    }

    /// A URL `credential_source` (https://google.aip.dev/auth/4117): the
    /// server's `/subject`, which wants the header and answers JSON.
    public static func urlSource(base: String) -> [String: Any] {
        [
            "url": "\(base)/subject", "headers": ["X-Test-Subject": "yes"],
            "format": ["type": "json", "subject_token_field_name": "token"],
        ]
    }

    /// An `external_account` file exchanging at the server's `/sts`, and
    /// impersonating `target` after it when `impersonate`.
    public static func externalAccount(
        base: String, source: [String: Any], impersonate: Bool = false, quota: String? = nil
    ) -> [String: Any] {
        var object: [String: Any] = [
            "type": "external_account", "audience": audience,
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": "\(base)/sts", "credential_source": source,
        ]
        if impersonate { object["service_account_impersonation_url"] = impersonationURL(base: base) }
        if let quota { object["quota_project_id"] = quota }
        return object
    }

    /// An `impersonated_service_account` file (https://google.aip.dev/auth/4119)
    /// whose source is the `authorized_user` of `base`.
    public static func impersonatedServiceAccount(base: String, quota: String? = nil) -> [String: Any] {
        var object: [String: Any] = [
            "type": "impersonated_service_account",
            "service_account_impersonation_url": impersonationURL(base: base),
            "source_credentials": authorizedUser(base: base), "delegates": [String](),
        ]
        if let quota { object["quota_project_id"] = quota }
        return object
    }

    /// A `service_account` key file (the JSON the console hands out).
    public static func serviceAccount(
        base: String, email: String, keyID: String, quota: String? = nil, privateKeyPEM: String
    ) -> [String: Any] {
        var object: [String: Any] = [
            "type": "service_account", "project_id": "bucketfs-test", "private_key_id": keyID,
            "private_key": privateKeyPEM, "client_email": email, "client_id": "1234567890",
            "token_uri": base + "/token",
        ]
        if let quota { object["quota_project_id"] = quota }
        return object
    }

    /// Writes `object` as JSON to `path`; returns `path`.
    @discardableResult
    public static func write(_ object: [String: Any], to path: String) throws -> String {
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A file-sourced subject token in `directory`; the `credential_source`.
    public static func fileSource(in directory: String, token: String = subjectToken) throws -> [String: Any] {
        let path = directory + "/subject-token"
        try Data("\(token)\n".utf8).write(to: URL(fileURLWithPath: path))
        return ["file": path]
    }
}
