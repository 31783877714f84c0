package dict

import "encoding/xml"

// The rest of the DICT API's messages (OpenAPI 1.8.0), which neither Client
// nor Transport encodes or decodes (Transport throttles their operations by
// route alone): TestOfficialExamplesRoundTrip reads the published examples
// into them. Names and nesting follow the examples. A type whose XMLName has
// no tag serves the operations its comment names and keeps the root element
// it was decoded from.

// updateEntryRequest and updateEntryResponse are updateEntry's (PUT /api/v2/entries/{Key}).
type updateEntryRequest struct {
	XMLName   xml.Name `xml:"UpdateEntryRequest"`
	Signature Signature
	Key       string
	Account   Account
	Owner     Owner
	Reason    string
}

type updateEntryResponse struct {
	XMLName xml.Name `xml:"UpdateEntryResponse"`
	answer
	Entry Entry
}

// createClaimRequest is the body of createClaim.
type createClaimRequest struct {
	XMLName   xml.Name `xml:"CreateClaimRequest"`
	Signature Signature
	Claim     Claim
}

// claimRequest is the body of acknowledgeClaim, confirmClaim, cancelClaim and completeClaim.
type claimRequest struct {
	XMLName     xml.Name
	Signature   Signature
	ClaimID     string `xml:"ClaimId"`
	Participant string
	Reason      string `xml:",omitempty"`
	RequestID   string `xml:"RequestId,omitempty"`
}

// claimResponse answers every claim operation but listClaims (completeClaim adds the entry's dates).
type claimResponse struct {
	XMLName xml.Name
	answer
	Claim             Claim
	EntryCreationDate *Timestamp `xml:",omitempty"`
	KeyOwnershipDate  *Timestamp `xml:",omitempty"`
}

// syncVerification is a check of a participant's CID set for one key type.
type syncVerification struct {
	Participant             string
	KeyType                 KeyType
	ParticipantSyncVerifier string
	ID                      string `xml:"Id,omitempty"`
	Result                  string `xml:",omitempty"`
}

// createSyncVerificationRequest and createSyncVerificationResponse are createSyncVerification's.
type createSyncVerificationRequest struct {
	XMLName          xml.Name `xml:"CreateSyncVerificationRequest"`
	Signature        Signature
	SyncVerification syncVerification
}

type createSyncVerificationResponse struct {
	XMLName xml.Name `xml:"CreateSyncVerificationResponse"`
	answer
	SyncVerification syncVerification
}

// createCidSetFileRequest is the body of createCidSetFile.
type createCidSetFileRequest struct {
	XMLName     xml.Name `xml:"CreateCidSetFileRequest"`
	Signature   Signature
	Participant string
	KeyType     KeyType
}

// cidSetFile is a file of a participant's CIDs for one key type.
type cidSetFile struct {
	ID           string `xml:"Id"`
	Status       string
	Participant  string
	KeyType      KeyType
	RequestTime  *Timestamp `xml:",omitempty"`
	CreationTime *Timestamp `xml:",omitempty"`
	URL          string     `xml:"Url,omitempty"`
	Bytes        string     `xml:",omitempty"`
	Sha256       string     `xml:",omitempty"`
}

// cidSetFileResponse is the answer of createCidSetFile and getCidSetFile.
type cidSetFileResponse struct {
	XMLName xml.Name
	answer
	CidSetFile cidSetFile
}

// cidSetEvent is one change of a CID set.
type cidSetEvent struct {
	Type      string
	Cid       string
	Timestamp Timestamp
}

// listCidSetEventsResponse is the answer of listCidSetEvents.
type listCidSetEventsResponse struct {
	XMLName xml.Name `xml:"ListCidSetEventsResponse"`
	answer
	HasMoreElements   bool
	Participant       string
	KeyType           KeyType
	StartTime         Timestamp
	EndTime           Timestamp
	SyncVerifierStart string
	SyncVerifierEnd   string
	CidSetEvents      []cidSetEvent `xml:"CidSetEvents>CidSetEvent"`
}

// getEntryByCidResponse is the answer of getEntryByCid.
type getEntryByCidResponse struct {
	XMLName xml.Name `xml:"GetEntryByCidResponse"`
	answer
	Cid       string
	Entry     Entry
	RequestID string `xml:"RequestId,omitempty"`
}

// infractingAccount is the account an infraction report points at.
type infractingAccount struct {
	Branch        string `xml:",omitempty"`
	AccountNumber string
}

// infractionData describes the transaction of an infraction report.
type infractionData struct {
	TaxIDNumber           string `xml:"TaxIdNumber,omitempty"`
	Key                   string `xml:",omitempty"`
	DebitedParticipant    string
	CreditedParticipant   string
	ReportedBy            string
	TransactionDate       *Timestamp         `xml:",omitempty"`
	InfractingAccountData *infractingAccount `xml:",omitempty"`
}

// infractionReport is a report of a suspected fraud.
type infractionReport struct {
	TransactionID       string          `xml:"TransactionId"`
	TransactionType     string          `xml:",omitempty"`
	TransactionResult   string          `xml:",omitempty"`
	InfractionData      *infractionData `xml:",omitempty"`
	InfractionType      string
	ReportDetails       string     `xml:",omitempty"`
	ID                  string     `xml:"Id,omitempty"`
	Status              string     `xml:",omitempty"`
	DebitedParticipant  string     `xml:",omitempty"`
	CreditedParticipant string     `xml:",omitempty"`
	ReportedBy          string     `xml:",omitempty"`
	CreationTime        *Timestamp `xml:",omitempty"`
	LastModified        *Timestamp `xml:",omitempty"`
	AnalysisResult      string     `xml:",omitempty"`
	AnalysisDetails     string     `xml:",omitempty"`
}

// createInfractionReportRequest is the body of createInfractionReport.
type createInfractionReportRequest struct {
	XMLName          xml.Name `xml:"CreateInfractionReportRequest"`
	Signature        Signature
	Participant      string
	InfractionReport infractionReport
}

// infractionReportRequest is the body of acknowledgeInfractionReport,
// cancelInfractionReport and closeInfractionReport (with the analysis).
type infractionReportRequest struct {
	XMLName            xml.Name
	Signature          Signature
	InfractionReportID string `xml:"InfractionReportId"`
	Participant        string
	AnalysisResult     string `xml:",omitempty"`
	AnalysisDetails    string `xml:",omitempty"`
}

// infractionReportResponse answers every infraction report operation but the listing.
type infractionReportResponse struct {
	XMLName xml.Name
	answer
	InfractionReport infractionReport
}

// listInfractionReportsResponse is the answer of listInfractionReports.
type listInfractionReportsResponse struct {
	XMLName xml.Name `xml:"ListInfractionReportsResponse"`
	answer
	HasMoreElements   bool
	InfractionReports []infractionReport `xml:"InfractionReports>InfractionReport"`
}

// refund is a special return (devolução) request.
type refund struct {
	TransactionID         string `xml:"TransactionId"`
	RefundReason          string
	RefundAmount          string
	RefundDetails         string     `xml:",omitempty"`
	ID                    string     `xml:"Id,omitempty"`
	Status                string     `xml:",omitempty"`
	ContestedParticipant  string     `xml:",omitempty"`
	RequestingParticipant string     `xml:",omitempty"`
	CreationTime          *Timestamp `xml:",omitempty"`
	LastModified          *Timestamp `xml:",omitempty"`
	AnalysisResult        string     `xml:",omitempty"`
	AnalysisDetails       string     `xml:",omitempty"`
	RefundTransactionID   string     `xml:"RefundTransactionId,omitempty"`
}

// createRefundRequest is the body of createRefund.
type createRefundRequest struct {
	XMLName     xml.Name `xml:"CreateRefundRequest"`
	Signature   Signature
	Participant string
	Refund      refund
}

// refundRequest is the body of cancelRefund and closeRefund (with the analysis).
type refundRequest struct {
	XMLName               xml.Name
	Signature             Signature
	RefundID              string `xml:"RefundId"`
	Participant           string
	RefundAnalysisResult  string `xml:",omitempty"`
	RefundAnalysisDetails string `xml:",omitempty"`
	RefundTransactionID   string `xml:"RefundTransactionId,omitempty"`
}

// refundResponse is the answer of createRefund, getRefund, cancelRefund and closeRefund.
type refundResponse struct {
	XMLName xml.Name
	answer
	Refund refund
}

// listRefundsResponse is the answer of listRefunds.
type listRefundsResponse struct {
	XMLName xml.Name `xml:"ListRefundsResponse"`
	answer
	HasMoreElements bool
	Refunds         []refund `xml:"Refunds>Refund"`
}

// ownerStatistics are the counters of one key owner.
type ownerStatistics struct {
	TaxIDNumber string `xml:"TaxIdNumber"`
	LastUpdated Timestamp
	Counters    []Counter `xml:"Counters>Counter"`
}

// getOwnerStatisticsResponse is the answer of GET /api/v2/statistics/owner/{TaxIdNumber}.
type getOwnerStatisticsResponse struct {
	XMLName xml.Name `xml:"GetOwnerStatisticsResponse"`
	answer
	OwnerStatistics ownerStatistics
}
