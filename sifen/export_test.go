package sifen

// CheckMessageBytes exposes checkMessageBytes to the tests of the size
// boundary, which no ZIP length reaches exactly (base64 grows by 4).
var CheckMessageBytes = checkMessageBytes

type EventKind = eventKind

type FileError = fileError

type LotSender = lotSender

const MaxFileSize = maxFileSize

const MaxLotDEs = maxLotDEs

const MaxLotMessageBytes = maxLotMessageBytes

var MessageSize = messageSize

var NotSent = notSent

var ParseLoteContext = parseLoteContext

var ReadResult = readResult

var ValidateCDC = validateCDC

var UnzipLote = unzipLote

const VerdictUnknown = verdictUnknown

const VerdictApproved = verdictApproved

const VerdictApprovedWithObs = verdictApprovedWithObs

const VerdictRejected = verdictRejected

type Verdict = verdict

func (c *Client) URL(env Env, path string) string { return c.url(env, path) }

func (l Lote) Validate() error { return l.validate() }

func (l Lote) XML() []byte { return l.document() }

func (r RUC) Validate() error { return r.validate() }

func (r DEResult) Verdict() Verdict { return r.verdict() }

var ImportFilesWith = importFiles

const ServiceConsultaLote = serviceConsultaLote

const CodeLotQueued = codeLotQueued

const CodeLotProcessing = codeLotProcessing

const CodeLotDone = codeLotDone

const CodeDENotFound = codeDENotFound

const CodeDEFound = codeDEFound

const ResultApproved = resultApproved

const ResultRejected = resultRejected
