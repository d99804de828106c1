/// A message that names a request by its request id (section 3.1): a
/// request on the frontend or the store socket, or the reply to one. Every
/// such message carries the id in frame 2.
public protocol CarriesRequestID: WireMessage {
    var requestID: UInt64 { get }
}

extension Submit: CarriesRequestID {}
extension Accepted: CarriesRequestID {}
extension Rejected: CarriesRequestID {}
extension StatusRequest: CarriesRequestID {}
extension StatusReply: CarriesRequestID {}
extension ReplayRequest: CarriesRequestID {}
extension ReplayEnd: CarriesRequestID {}
extension DeadListRequest: CarriesRequestID {}
extension DeadListReply: CarriesRequestID {}
extension DeadRetry: CarriesRequestID {}
extension DeadDiscard: CarriesRequestID {}
extension JobInfoRequest: CarriesRequestID {}
extension JobInfoReply: CarriesRequestID {}
extension CancelRequest: CarriesRequestID {}
extension PauseRequest: CarriesRequestID {}
extension ResumeRequest: CarriesRequestID {}
extension JobListRequest: CarriesRequestID {}
extension JobListReply: CarriesRequestID {}
extension Ping: CarriesRequestID {}
extension Pong: CarriesRequestID {}
extension OKReply: CarriesRequestID {}
extension ErrorReply: CarriesRequestID {}
extension StoreRequest: CarriesRequestID {}
extension Stored: CarriesRequestID {}
extension ListRequest: CarriesRequestID {}
extension ListReply: CarriesRequestID {}
extension GetRequest: CarriesRequestID {}
extension GetReply: CarriesRequestID {}
extension DeleteRequest: CarriesRequestID {}
extension StatsRequest: CarriesRequestID {}
extension StatsReply: CarriesRequestID {}

extension FrontendMessage {
    /// The request id the message carries; nil for EVENT, which answers no
    /// one request (replayed events are matched by seq, section 5.3).
    public var requestID: UInt64? { (body as? any CarriesRequestID)?.requestID }
}

extension StoreMessage {
    /// The request id the message carries (every store-socket message has one).
    public var requestID: UInt64? { (body as? any CarriesRequestID)?.requestID }
}

extension BackendMessage {
    /// The request id of an ERROR; nil for every other backend command (the
    /// backend names jobs by job id and attempt instead).
    public var requestID: UInt64? { (body as? any CarriesRequestID)?.requestID }
}
