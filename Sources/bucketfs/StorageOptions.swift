import ArgumentParser
import Foundation
import Logging
import StorageKit
import Transport

/// Where the bucket lives and how to authenticate: shared by every command.
///
/// OAuth credentials (or none) speak the Cloud Storage JSON API; a
/// Firebase Auth sign-in speaks the Firebase Storage REST API (v0) as that
/// user, where the bucket's Security Rules decide.
struct StorageOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Storage endpoint, e.g. http://127.0.0.1:9023 for an emulator.",
        discussion: "Default: STORAGE_EMULATOR_HOST when set, else https://storage.googleapis.com; with a Firebase sign-in FIREBASE_STORAGE_EMULATOR_HOST, else https://firebasestorage.googleapis.com."))
    var endpoint: String?

    @Option(name: .customLong("key-file"), help: ArgumentHelp(
        "Google credentials JSON file: a service-account key, or an authorized_user, external_account or impersonated_service_account file.",
        discussion: "Default: Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, then gcloud's application_default_credentials.json, then the metadata server."))
    var keyFile: String?

    @Option(name: .customLong("impersonate-service-account"), help: "Act as this service account (EMAIL), with tokens the IAM Credentials API mints for the credentials chosen otherwise.")
    var impersonateServiceAccount: String?

    @Option(name: .customLong("iam-endpoint"), help: "The IAM Credentials API for --impersonate-service-account (default: https://iamcredentials.googleapis.com).")
    var iamEndpoint: String?

    @Option(name: .customLong("billing-project"), help: "Project billed for requests to a requester-pays bucket (sent as userProject).")
    var billingProject: String?

    @Option(name: .customLong("token-file"), help: "File holding an OAuth2 access token (re-read when it changes).")
    var tokenFile: String?

    @Flag(help: "Send no credentials (public buckets, emulators).")
    var anonymous = false

    @Option(name: .customLong("firebase-api-key"), help: "The Firebase app's Web API key, for a Firebase sign-in (default: apiKey of FIREBASE_CONFIG, the app's configuration as JSON or a file).")
    var firebaseAPIKey: String?

    @Option(name: .customLong("firebase-email"), help: "Sign in to Firebase Auth with this email (and --firebase-password-file): requests go through the Firebase Storage REST API as that user, under the bucket's Security Rules.")
    var firebaseEmail: String?

    @Option(name: .customLong("firebase-password-file"), help: "File holding the password of --firebase-email.")
    var firebasePasswordFile: String?

    @Option(name: .customLong("firebase-refresh-token-file"), help: "Sign in to Firebase Auth with the refresh token in this file (kept from an earlier sign-in).")
    var firebaseRefreshTokenFile: String?

    @Option(name: .customLong("firebase-custom-token-file"), help: "Sign in to Firebase Auth with the custom token in this file (minted by the app's server).")
    var firebaseCustomTokenFile: String?

    @Flag(name: .customLong("firebase-anonymous"), help: "Sign in to Firebase Auth as a new anonymous user.")
    var firebaseAnonymous = false

    @Option(name: .customLong("firebase-auth-emulator"), help: "host:port of the Firebase Auth emulator (default: FIREBASE_AUTH_EMULATOR_HOST; else Firebase Auth itself).")
    var firebaseAuthEmulator: String?

    /// How many Firebase sign-ins were asked for.
    private var firebaseMethods: Int {
        [firebaseEmail != nil, firebaseRefreshTokenFile != nil, firebaseCustomTokenFile != nil, firebaseAnonymous].filter { $0 }.count
    }

    func validate() throws {
        let firebase = firebaseMethods > 0
        if [keyFile != nil, tokenFile != nil, anonymous, firebase].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --key-file, --token-file, --anonymous and a Firebase sign-in")
        }
        if impersonateServiceAccount != nil && (anonymous || firebase) {
            throw ValidationError("--impersonate-service-account needs Google credentials, not --anonymous or a Firebase sign-in")
        }
        if iamEndpoint != nil && impersonateServiceAccount == nil {
            throw ValidationError("--iam-endpoint goes with --impersonate-service-account")
        }
        if billingProject != nil && firebase {
            throw ValidationError("--billing-project is for the Cloud Storage JSON API, not a Firebase sign-in")
        }
        if firebaseMethods > 1 {
            throw ValidationError("choose one Firebase sign-in: --firebase-email, --firebase-refresh-token-file, --firebase-custom-token-file or --firebase-anonymous")
        }
        if (firebaseEmail == nil) != (firebasePasswordFile == nil) {
            throw ValidationError("--firebase-email and --firebase-password-file go together")
        }
        if !firebase && (firebaseAPIKey != nil || firebaseAuthEmulator != nil) {
            throw ValidationError("--firebase-api-key and --firebase-auth-emulator need a Firebase sign-in (e.g. --firebase-email)")
        }
    }

    func configuration(transport: HTTPTransport = .shared) throws -> StorageConfiguration {
        var configuration = StorageConfiguration.fromEnvironment()
        configuration.transport = transport
        let environment = ProcessInfo.processInfo.environment
        if let endpoint {
            guard let url = StorageConfiguration.emulatorURL(endpoint) else {
                throw ValidationError("--endpoint \(endpoint) is not a URL")
            }
            configuration.endpoint = url
        }
        do {
            if let signIn = try firebaseSignIn() {
                var auth = try FirebaseAuth.fromEnvironment(apiKey: firebaseAPIKey, environment: environment, transport: transport)
                if let host = firebaseAuthEmulator {
                    guard let url = StorageConfiguration.emulatorURL(host), let name = url.host, let port = url.port else {
                        throw ValidationError("--firebase-auth-emulator \(host) is not host:port")
                    }
                    auth.useEmulator(withHost: name, port: port)
                }
                configuration.credentials = FirebaseAuthCredentials(auth: auth, signIn: signIn, logger: Logger(label: "bucketfs.credentials"))
            } else if let google = try googleCredentials(environment: environment, transport: transport) {
                configuration.credentials = google
            }
        } catch let error as CredentialsError {
            throw CLIError.bucket("credentials: \(error)", exitCode: 3)
        }
        configuration.billingProject = billingProject
        return configuration
    }

    /// OAuth credentials: the key or token file given, else (unless
    /// anonymous, or an emulator is named without impersonation) the
    /// Application Default Credentials; wrapped for impersonation when asked.
    private func googleCredentials(
        environment: [String: String], transport: HTTPTransport
    ) throws(CredentialsError) -> (any CredentialsProvider)? {
        let base: (any CredentialsProvider)?
        if let keyFile {
            base = try CredentialsFile.load(keyFile, transport: transport)
        } else if let tokenFile {
            base = StaticTokenCredentials(tokenFile: tokenFile)
        } else if !anonymous,
                  impersonateServiceAccount != nil || (endpoint == nil && (environment["STORAGE_EMULATOR_HOST"] ?? "").isEmpty) {
            base = try Credentials.fromEnvironment(environment, transport: transport)
        } else {
            base = nil
        }
        guard let base, let email = impersonateServiceAccount else { return base }
        return ImpersonatedCredentials(
            serviceAccount: email, source: base, endpoint: iamEndpoint ?? ImpersonatedCredentials.iamCredentialsEndpoint,
            transport: transport)
    }

    /// The Firebase sign-in asked for, its secrets read from their files
    /// (errors name the file, never its content).
    private func firebaseSignIn() throws(CredentialsError) -> FirebaseAuthCredentials.SignIn? {
        if let firebaseEmail, let firebasePasswordFile {
            return .emailPassword(email: firebaseEmail, password: try Self.secret(firebasePasswordFile, "password"))
        }
        if let firebaseRefreshTokenFile { return .refreshToken(try Self.secret(firebaseRefreshTokenFile, "refresh token")) }
        if let firebaseCustomTokenFile { return .customToken(try Self.secret(firebaseCustomTokenFile, "custom token")) }
        return firebaseAnonymous ? .anonymous : nil
    }

    private static func secret(_ path: String, _ what: String) throws(CredentialsError) -> String {
        try FirebaseAuthCredentials.readSecret(fromFile: path, what: what)
    }
}
