import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ

/// How a storage node runs. Every default lets `darkroom store` work on
/// loopback with no flags.
public struct StoreConfiguration: Sendable {
    /// The ROUTER endpoint workers and clients connect to.
    public var endpoint: String
    /// An `inproc://` endpoint the ROUTER also binds, for workers in the
    /// same process (`darkroom up`); as for the broker's, connections over
    /// it skip CURVE and ZAP.
    public var localEndpoint: String?
    /// Where `store.db` and the `blobs/` directory live; created if missing.
    public var dataDirectory: String
    /// Images larger than this many bytes are kept in content-addressed files
    /// instead of inline in SQLite. SQLite's own measurements put the
    /// crossover near 100 KB.
    public var externalBlobThreshold: Int
    /// `ZMQ_MAXMSGSIZE` on the socket: a peer sending a larger message is
    /// disconnected by ZeroMQ. Also the largest blob file GET will read.
    public var maxMessageSize: Int64
    /// The most requests taken from the socket in one loop turn (one commit).
    public var maxRequestsPerTurn: Int
    /// The most request bytes taken in one loop turn, so a burst of large
    /// STOREs is committed in several transactions rather than held in memory.
    public var maxBytesPerTurn: Int
    /// How long replies still queued when the node stops may take to leave.
    public var lingerMilliseconds: Int
    /// CURVE keys: when set, the socket is a CURVE server in the ZAP domain
    /// "store", and a ZAP handler on the same context decides who may connect.
    public var curve: ServerCurve?
    /// With keys: whether a connection's key (as its ZAP user id names it)
    /// is still admitted, asked for every request, so a key revoked while
    /// the node runs is refused from its next request on. Nil admits every
    /// connection ZAP admitted.
    public var admission: (@Sendable (ConnectionIdentity) -> Bool)?
    /// The limits each stored image's header must be within: by default the
    /// workers' own (`DecodeLimits.default`), which bound every output they
    /// make, so only a STORE no worker would send is refused. Set them to the
    /// workers' when those are raised. `failOnWarning` is always on here: a
    /// header that ends early is refused, never guessed at.
    public var imageLimits: DecodeLimits
    /// How long a record is kept (`--keep-records`): a record stored longer
    /// ago is deleted with its thumbnail and blob files. Nil keeps records
    /// until `darkroom rm`.
    public var recordLifetime: Duration?
    /// The most image bytes (full-resolution and thumbnails, as stored)
    /// the node keeps (`--keep-bytes`): past it, the oldest records are
    /// deleted until the rest fit. Nil: no cap.
    public var maxImageBytes: UInt64?
    /// How often the node looks for records past `recordLifetime`, when
    /// the last look left none (a tenth of the lifetime if that is
    /// shorter, but not under 100 ms).
    public var expiryInterval: Duration = .seconds(30)
    /// The most records one look deletes, in one transaction; a look that
    /// deletes this many is followed by another as soon as the requests
    /// waiting meanwhile are answered.
    public var expiryBatch: Int = 500
    /// The most blob files mapped at once for GET-REPLYs, sent or waiting
    /// for their readers: a quarter of the kernel's default map table
    /// (`vm.max_map_count`, 65,530), which `malloc` needs too. A GET past
    /// it is answered `queue-full`.
    public var maxMappedImages: Int = 16_384
    /// The most bytes of inline images (those kept in the database) copied
    /// for GET-REPLYs and not yet sent, in all the node's queues: with
    /// ZeroMQ's 1,000 messages a connection, a client that asks for
    /// images of up to `externalBlobThreshold` and reads none holds about
    /// 100 MB, and many such connections could hold any amount. A GET
    /// past it is answered `queue-full`.
    public var maxQueuedImageBytes: Int = 256 << 20

    public init(
        endpoint: String = Wire.Endpoint.store,
        dataDirectory: String = "darkroom-data/store",
        externalBlobThreshold: Int = 100 * 1024,
        maxMessageSize: Int64 = Wire.maxMessageSize,
        maxRequestsPerTurn: Int = 1_000,
        maxBytesPerTurn: Int = 256 * 1024 * 1024,
        lingerMilliseconds: Int = 200,
        curve: ServerCurve? = nil,
        localEndpoint: String? = nil,
        imageLimits: DecodeLimits = .default
    ) {
        self.endpoint = endpoint
        self.localEndpoint = localEndpoint
        self.dataDirectory = dataDirectory
        self.externalBlobThreshold = externalBlobThreshold
        self.maxMessageSize = maxMessageSize
        self.maxRequestsPerTurn = maxRequestsPerTurn
        self.maxBytesPerTurn = maxBytesPerTurn
        self.lingerMilliseconds = lingerMilliseconds
        self.curve = curve
        self.imageLimits = imageLimits
    }
}
