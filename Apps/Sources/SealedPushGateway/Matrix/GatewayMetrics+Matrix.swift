/// The Matrix push gateway's metrics (matrix v1, issue 48): per app and platform, never a pushkey, a Matrix id or
/// a Matrix `app_id` (a homeserver chooses those).
extension GatewayMetrics {
    /// `sealedpush_matrix_notifies_total{app,platform}`: a device of a notification queued.
    func matrixNotify(app: String, platform: String) {
        counter("sealedpush_matrix_notifies_total", [("app", app), ("platform", platform)]).increment()
    }

    /// `sealedpush_matrix_rejected_pushkeys_total{app,platform,reason}`: a pushkey answered in `rejected` (`app` and
    /// `platform` are `unknown` for an `app_id` no app has).
    func matrixRejected(app: String, platform: String, reason: MatrixRejection) {
        counter("sealedpush_matrix_rejected_pushkeys_total", [("app", app), ("platform", platform), ("reason", reason.rawValue)]).increment()
    }

    /// `sealedpush_matrix_retries_total{app,platform}`: a homeserver's repeat of a device of a notification, answered
    /// as the first was and queued nothing.
    func matrixRetry(app: String, platform: String) {
        counter("sealedpush_matrix_retries_total", [("app", app), ("platform", platform)]).increment()
    }

    /// Declares an app's Matrix series at zero for each platform its `matrix.app_ids` name.
    func declareMatrix(app: String, platforms: Set<PushPlatform>) {
        for platform in platforms {
            _ = counter("sealedpush_matrix_notifies_total", [("app", app), ("platform", platform.rawValue)])
            _ = counter("sealedpush_matrix_retries_total", [("app", app), ("platform", platform.rawValue)])
        }
    }
}
