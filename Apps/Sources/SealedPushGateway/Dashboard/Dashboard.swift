import Mustache
import SealedPushWire

/// The dashboard on `admin_listen` at `/` (issue #21 item 4): one server-rendered HTML page (swift-mustache),
/// refreshing itself every 10 s, with per app the deliveries by state over the last hour and day (and an inline
/// SVG chart of the last 24 hours), each push service's last answers by platform, receipts against accepted pushes, failure reports, the
/// queue, devices, webhook events, and the live instances with their leases. No script, no external resource.
///
/// Only counts, states, reasons, key ids and app ids appear: never a token, device id, user id or message body
/// (the snapshot holds none). Each number carries `data-metric="<app>.<name>"` so that tests can read it.
enum Dashboard {
    /// The page for `snapshot`, listing the configured apps (in configuration order) with zeros where the store has
    /// no rows; `paused` gives the apps whose credentials APNs refused, with the reason.
    static func render(_ snapshot: DashboardSnapshot, apps: [GatewayAppConfiguration], paused: [String: String]) throws -> String {
        let template = try Self.template.get()
        let now = snapshot.takenAt
        let views = apps.map { config in
            AppView(snapshot.apps[config.id] ?? DashboardSnapshot.App(app: config.id), config: config, paused: paused[config.id], now: now)
        }
        let instances = snapshot.instances.map { i in
            InstanceView(name: i.name, startedAt: GatewayTime.format(i.startedAt), leasedDeliveries: i.leasedDeliveries, leasedEvents: i.leasedEvents)
        }
        return template.render(PageView(takenAt: GatewayTime.format(now), instances: instances, apps: views))
    }

    static let template = Result { try MustacheTemplate(string: html) }

    /// The states in the order the page lists them, with their chart colours (each readable on white).
    static let states: [(state: DeliveryState, colour: String)] = [
        (.queued, "#6b7280"), (.accepted, "#1d4ed8"), (.delivered, "#15803d"), (.rejected, "#b91c1c"),
        (.unregistered, "#a16207"), (.expired, "#7c3aed"), (.cancelled, "#374151"),
    ]

    struct PageView {
        let takenAt: String
        let instances: [InstanceView]
        let apps: [AppView]
    }

    struct InstanceView {
        let name: String
        let startedAt: String
        let leasedDeliveries: Int
        let leasedEvents: Int
    }

    struct StateRow {
        let state: String
        let colour: String
        let hour: Int
        let day: Int
    }

    struct AnswerRow {
        let platform: String
        let status: Int
        let reason: String
        let count: Int
    }

    struct ReportRow {
        let reason: String
        let kid: String
        let count: Int
        let lastAt: String
    }

    struct AppView {
        let id: String
        let status: String
        let pausedReason: String?
        let states: [StateRow]
        let hourTotal: Int
        let dayTotal: Int
        let chart: String
        let answers: [AnswerRow]
        let hasAnswers: Bool
        let accepted: Int
        let delivered: Int
        let openedPercent: String
        let reports: [ReportRow]
        let hasReports: Bool
        let queued: Int
        let oldestAge: String
        let leased: Int
        let devicesActive: Int
        let devicesUnregistered: Int
        let webhook: String
        let eventsPending: Int
        let eventsDropped: Int

        init(_ a: DashboardSnapshot.App, config: GatewayAppConfiguration, paused: String?, now: Int64) {
            id = config.id
            status = paused == nil ? "sending" : "paused"
            pausedReason = paused
            states = Dashboard.states.map { s in
                StateRow(state: s.state.rawValue, colour: s.colour, hour: a.lastHour[s.state.rawValue] ?? 0, day: a.lastDay[s.state.rawValue] ?? 0)
            }
            hourTotal = a.lastHour.values.reduce(0, +)
            dayTotal = a.lastDay.values.reduce(0, +)
            chart = Dashboard.chart(a.hourly, app: config.id)
            answers = a.answers.sorted { ($0.platform, -$0.count, $0.status) < ($1.platform, -$1.count, $1.status) }
                .map { AnswerRow(platform: $0.platform.rawValue, status: $0.status, reason: $0.reason.isEmpty ? "—" : $0.reason, count: $0.count) }
            hasAnswers = !answers.isEmpty
            accepted = a.acceptedLastDay
            delivered = a.deliveredLastDay
            openedPercent = a.acceptedLastDay == 0 ? "—" : String(Int((Double(a.deliveredLastDay) / Double(a.acceptedLastDay) * 100).rounded())) + " %"
            reports = a.reports.map { ReportRow(reason: $0.reason, kid: $0.kid, count: $0.count, lastAt: GatewayTime.format($0.lastAt)) }
            hasReports = !reports.isEmpty
            queued = a.queued
            oldestAge = a.oldestQueuedAt.map { Dashboard.age(max(0, now - $0)) } ?? "—"
            leased = a.leasedDeliveries
            devicesActive = a.devicesActive
            devicesUnregistered = a.devicesUnregistered
            webhook = config.webhook.map { HTTPURL($0.url)?.origin ?? "configured" } ?? "none"
            eventsPending = a.eventsPending
            eventsDropped = a.eventsDropped
        }
    }

    /// `1 h 02 min`, `3 min 04 s`, `12 s`.
    static func age(_ ms: Int64) -> String {
        let s = ms / 1000
        if s >= 3600 { return "\(s / 3600) h \(format2(s % 3600 / 60)) min" }
        if s >= 60 { return "\(s / 60) min \(format2(s % 60)) s" }
        return "\(s) s"
    }

    static func format2(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }

    /// 24 stacked bars, oldest hour on the left, each state in its colour; each bar has a `<title>` naming its
    /// hour and counts (screen readers read it; the table beside it holds the same totals).
    static func chart(_ hourly: [[String: Int]], app: String) -> String {
        let width = 480, height = 110, gap = 2
        let bar = width / 24 - gap
        let peak = max(1, hourly.map { $0.values.reduce(0, +) }.max() ?? 1)
        var out = "<svg viewBox=\"0 0 \(width) \(height + 22)\" width=\"100%\" role=\"img\" aria-labelledby=\"chart-\(escape(app))-title\" "
            + "xmlns=\"http://www.w3.org/2000/svg\"><title id=\"chart-\(escape(app))-title\">Deliveries created per hour over the last 24 hours, by current state</title>"
        out += "<text x=\"0\" y=\"13\" font-size=\"13\" fill=\"#374151\">peak \(peak) per hour</text>"
        out += "<line x1=\"0\" y1=\"\(height)\" x2=\"\(width)\" y2=\"\(height)\" stroke=\"#9ca3af\" stroke-width=\"1\"/>"
        for slot in 0..<24 {
            let hoursAgo = 23 - slot
            let counts = hourly.indices.contains(hoursAgo) ? hourly[hoursAgo] : [:]
            let x = slot * (bar + gap)
            var y = height
            let total = counts.values.reduce(0, +)
            let label = (hoursAgo == 0 ? "last hour" : "\(hoursAgo)–\(hoursAgo + 1) h ago") + ": \(total) deliveries"
                + states.compactMap { s in counts[s.state.rawValue].map { ", \($0) \(s.state.rawValue)" } }.joined()
            out += "<g><title>\(escape(label))</title>"
            for s in states {
                guard let n = counts[s.state.rawValue], n > 0 else { continue }
                let h = max(1, n * (height - 18) / peak)  // the top 18 units hold the peak label
                y -= h
                out += "<rect x=\"\(x)\" y=\"\(y)\" width=\"\(bar)\" height=\"\(h)\" fill=\"\(s.colour)\"/>"
            }
            out += "</g>"
        }
        out += "<text x=\"0\" y=\"\(height + 16)\" font-size=\"13\" fill=\"#374151\">24 h ago</text>"
        out += "<text x=\"\(width)\" y=\"\(height + 16)\" font-size=\"13\" fill=\"#374151\" text-anchor=\"end\">now</text>"
        out += "</svg>"
        return out
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    static let html = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta http-equiv="refresh" content="10">
    <title>SealedPush gateway</title>
    <style>
    :root { color-scheme: light; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111827; background: #f9fafb; }
    body { margin: 0 auto; max-width: 1240px; padding: 12px 16px 32px; line-height: 1.4; }
    h1 { font-size: 1.4rem; margin: 0.2rem 0; }
    h2 { font-size: 1.2rem; margin: 1.4rem 0 0.6rem; }
    header p { margin: 0; color: #374151; font-size: 0.9rem; }
    .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(280px, 1fr)); gap: 12px; }
    .card { background: #fff; border: 1px solid #d1d5db; border-radius: 6px; padding: 8px 10px; min-width: 0; }
    @media (min-width: 760px) { .chart { grid-column: span 2; } }
    th.state { white-space: nowrap; }
    table { border-collapse: collapse; width: 100%; font-size: 0.92rem; }
    caption { text-align: left; font-weight: 600; padding-bottom: 4px; }
    th, td { padding: 3px 6px; border-bottom: 1px solid #e5e7eb; text-align: left; }
    td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
    .kid { font-family: ui-monospace, monospace; word-break: break-all; }
    .badge { font-size: 0.8rem; padding: 1px 8px; border-radius: 10px; background: #dcfce7; color: #14532d; vertical-align: middle; }
    .badge.paused { background: #fee2e2; color: #7f1d1d; }
    .swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 4px; vertical-align: -1px; border-radius: 2px; }
    figure { margin: 0; }
    figcaption { font-size: 0.85rem; color: #374151; }
    .table-scroll { overflow-x: auto; }
    @media (max-width: 480px) { body { padding: 8px; } table { font-size: 0.85rem; } th, td { padding: 3px 4px; } }
    </style>
    </head>
    <body>
    <header>
    <h1>SealedPush gateway</h1>
    <p>Numbers as of <time datetime="{{takenAt}}">{{takenAt}}</time>; this page reloads every 10 seconds. Counts only: no token, device id, user id or message is shown.</p>
    </header>
    <main>
    <section aria-labelledby="instances-heading">
    <h2 id="instances-heading">Instances</h2>
    <div class="card table-scroll">
    <table>
    <caption>Live instances and the leases they hold</caption>
    <thead><tr><th scope="col">Instance</th><th scope="col">Started</th><th scope="col" class="n">Leased deliveries</th><th scope="col" class="n">Leased events</th></tr></thead>
    <tbody>
    {{#instances}}<tr><th scope="row">{{name}}</th><td>{{startedAt}}</td><td class="n" data-metric="instance.leased_deliveries">{{leasedDeliveries}}</td><td class="n" data-metric="instance.leased_events">{{leasedEvents}}</td></tr>
    {{/instances}}
    </tbody>
    </table>
    </div>
    </section>
    {{#apps}}
    <section aria-labelledby="app-{{id}}-heading" data-app="{{id}}">
    <h2 id="app-{{id}}-heading">App {{id}} {{#pausedReason}}<span class="badge paused">paused: {{pausedReason}}</span>{{/pausedReason}}{{^pausedReason}}<span class="badge">sending</span>{{/pausedReason}}</h2>
    <div class="grid">
    <div class="card table-scroll">
    <table>
    <caption>Deliveries by current state, created in the last hour and day</caption>
    <thead><tr><th scope="col">State</th><th scope="col" class="n">Last hour</th><th scope="col" class="n">Last 24 h</th></tr></thead>
    <tbody>
    {{#states}}<tr><th scope="row" class="state"><span class="swatch" style="background: {{colour}}" aria-hidden="true"></span>{{state}}</th><td class="n" data-metric="{{id}}.hour.{{state}}">{{hour}}</td><td class="n" data-metric="{{id}}.day.{{state}}">{{day}}</td></tr>
    {{/states}}
    </tbody>
    <tfoot><tr><th scope="row">All</th><td class="n" data-metric="{{id}}.hour.total">{{hourTotal}}</td><td class="n" data-metric="{{id}}.day.total">{{dayTotal}}</td></tr></tfoot>
    </table>
    </div>
    <div class="card chart">
    <figure>
    {{{chart}}}
    <figcaption>Deliveries created per hour over the last 24 hours, stacked by current state (colours as in the table).</figcaption>
    </figure>
    </div>
    <div class="card table-scroll">
    <table>
    <caption>Receipts against accepted pushes (last 24 h)</caption>
    <tbody>
    <tr><th scope="row">Accepted by APNs</th><td class="n" data-metric="{{id}}.accepted">{{accepted}}</td></tr>
    <tr><th scope="row">Opened (receipt arrived)</th><td class="n" data-metric="{{id}}.delivered">{{delivered}}</td></tr>
    <tr><th scope="row">Opened per accepted</th><td class="n" data-metric="{{id}}.opened_percent">{{openedPercent}}</td></tr>
    </tbody>
    </table>
    </div>
    <div class="card table-scroll">
    <table>
    <caption>Queue and devices</caption>
    <tbody>
    <tr><th scope="row">Queued deliveries</th><td class="n" data-metric="{{id}}.queued">{{queued}}</td></tr>
    <tr><th scope="row">Oldest queued</th><td class="n" data-metric="{{id}}.oldest">{{oldestAge}}</td></tr>
    <tr><th scope="row">Leased now (attempts in flight)</th><td class="n" data-metric="{{id}}.leased">{{leased}}</td></tr>
    <tr><th scope="row">Devices active</th><td class="n" data-metric="{{id}}.devices.active">{{devicesActive}}</td></tr>
    <tr><th scope="row">Devices unregistered</th><td class="n" data-metric="{{id}}.devices.unregistered">{{devicesUnregistered}}</td></tr>
    </tbody>
    </table>
    </div>
    <div class="card table-scroll">
    <table>
    <caption>Push service answers, by platform (last answer per delivery, last 24 h)</caption>
    <thead><tr><th scope="col">Platform</th><th scope="col">Status</th><th scope="col">Reason</th><th scope="col" class="n">Deliveries</th></tr></thead>
    <tbody>
    {{#answers}}<tr><td>{{platform}}</td><td>{{status}}</td><td>{{reason}}</td><td class="n" data-metric="{{id}}.{{platform}}.{{status}}.{{reason}}">{{count}}</td></tr>
    {{/answers}}
    {{^hasAnswers}}<tr><td colspan="4">No answers from a push service yet.</td></tr>{{/hasAnswers}}
    </tbody>
    </table>
    </div>
    <div class="card table-scroll">
    <table>
    <caption>Failure reports from devices, by reason and key id</caption>
    <thead><tr><th scope="col">Reason</th><th scope="col">Key id</th><th scope="col" class="n">Count</th><th scope="col">Last</th></tr></thead>
    <tbody>
    {{#reports}}<tr><td>{{reason}}</td><td class="kid">{{kid}}</td><td class="n" data-metric="{{id}}.report.{{reason}}.{{kid}}">{{count}}</td><td>{{lastAt}}</td></tr>
    {{/reports}}
    {{^hasReports}}<tr><td colspan="4">No failure reports.</td></tr>{{/hasReports}}
    </tbody>
    </table>
    </div>
    <div class="card table-scroll">
    <table>
    <caption>Webhook events (kept 7 days)</caption>
    <tbody>
    <tr><th scope="row">Webhook (events are listed either way)</th><td class="n">{{webhook}}</td></tr>
    <tr><th scope="row">Not yet acknowledged</th><td class="n" data-metric="{{id}}.events.pending">{{eventsPending}}</td></tr>
    <tr><th scope="row">Dropped after 24 h</th><td class="n" data-metric="{{id}}.events.dropped">{{eventsDropped}}</td></tr>
    </tbody>
    </table>
    </div>
    </div>
    </section>
    {{/apps}}
    </main>
    </body>
    </html>
    """#
}
