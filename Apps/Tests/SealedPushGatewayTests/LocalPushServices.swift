import Foundation
import SealedPushWire
import SealedPushTestSupport
import Testing

/// `sealedpush-server fcm serve` as a child process on a loopback port of its own, with a service account made by
/// `fcm generate-service-account`: what the end-to-end tests of the gateway's FCM path share.
struct LocalFCMServe {
    /// The running `fcm serve`: its stdout lines are its simulated devices' outcomes.
    let process: ChildProcess
    /// `https://127.0.0.1:PORT`, where it listens.
    let base: String
    /// The service account's JSON key file.
    let account: String
    /// The CA certificate (PEM) its TLS certificate chains to.
    let caPath: String

    /// The app's `fcm` section that sends through this service (its token endpoint, its CA).
    var section: JSONObject {
        JSONObject([("fcm", .object(JSONObject([
            ("service_account", .string(account)), ("url", .string(base)), ("token_url", .string(base + "/token")), ("ca_cert", .string(caPath)),
        ])))])
    }

    /// Makes a service account of `project` in `directory` and starts `fcm serve` with it and `arguments` (`--device`,
    /// `--accept-unknown`, `--capture`…); waits for its listening line.
    static func start(in directory: URL, project: String, arguments: [String]) async throws -> LocalFCMServe {
        let account = directory.appendingPathComponent("sa.json").path
        let made = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                    ["fcm", "generate-service-account", "--project", project, "--out", account]).waitForExit(within: .seconds(60))
        try #require(made.status == 0, "generate-service-account: \(made.stderr)")
        let caPath = directory.appendingPathComponent("fcm-ca.pem").path
        let serve = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                     ["fcm", "serve", "--listen", "127.0.0.1:0", "--service-account", account, "--ca-out", caPath] + arguments,
                                     readLines: true)
        guard let listening = try await offPool({ serve.waitForLine(startingWith: "listening on ", within: .seconds(60)) }) else {
            _ = serve.terminate(grace: .seconds(15))
            throw LocalServiceError(description: "fcm serve did not start: \(serve.stderrText)")
        }
        let base = String(listening.dropFirst("listening on ".count).split(separator: " ")[0])
        return LocalFCMServe(process: serve, base: base, account: account, caPath: caPath)
    }

    /// Stops the service (its devices finish what it accepted).
    func stop() { _ = process.terminate(grace: .seconds(15)) }
}

/// `sealedpush-server webpush serve` as a child process on a loopback port of its own, with a VAPID key made by
/// `webpush generate-vapid`: what the end-to-end tests of the gateway's Web Push path share.
struct LocalWebPushServe {
    /// The running `webpush serve`: its stdout lines are its simulated browsers' outcomes.
    let process: ChildProcess
    /// `https://127.0.0.1:PORT`, the origin of its push endpoints (`/push/ID`).
    let origin: String
    /// The CA certificate (PEM) its TLS certificate chains to.
    let caPath: String
    /// The VAPID private key the gateway signs with.
    let vapidPath: String

    /// The app's `webpush` section that sends to this service (private endpoints allowed, its CA).
    var section: JSONObject {
        JSONObject([("webpush", .object(JSONObject([
            ("vapid_key", .string(vapidPath)), ("subject", "mailto:ops@example.com"), ("allow_private_endpoints", .bool(true)), ("ca_cert", .string(caPath)),
        ])))])
    }

    /// Starts `webpush serve` in `directory` with `arguments` (`--subscription`, `--accept-unknown`, `--capture`…),
    /// waits for its listening line, and makes a VAPID key.
    static func start(in directory: URL, arguments: [String]) async throws -> LocalWebPushServe {
        let caPath = directory.appendingPathComponent("webpush-ca.pem").path
        let serve = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                     ["webpush", "serve", "--listen", "127.0.0.1:0", "--ca-out", caPath] + arguments, readLines: true)
        guard let listening = try await offPool({ serve.waitForLine(startingWith: "listening on ", within: .seconds(60)) }) else {
            _ = serve.terminate(grace: .seconds(15))
            throw LocalServiceError(description: "webpush serve did not start: \(serve.stderrText)")
        }
        let origin = String(listening.dropFirst("listening on ".count).split(separator: " ")[0])
        let vapid = directory.appendingPathComponent("vapid.p8").path
        let generated = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary, ["webpush", "generate-vapid", "--out", vapid])
            .waitForExit(within: .seconds(30))
        guard generated.status == 0 else {
            _ = serve.terminate(grace: .seconds(15))
            throw LocalServiceError(description: "generate-vapid: \(generated.stderr)")
        }
        return LocalWebPushServe(process: serve, origin: origin, caPath: caPath, vapidPath: vapid)
    }

    /// Stops the service (its browsers finish what it accepted).
    func stop() { _ = process.terminate(grace: .seconds(15)) }
}

/// A local push service that did not start, and what it said.
struct LocalServiceError: Error, CustomStringConvertible {
    let description: String
}
