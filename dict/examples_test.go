package dict_test

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
)

// officialExamples is the folder of the DICT API's published example
// bodies (OpenAPI 1.8.0), copied unchanged into testdata/official (see its
// README) so that the round trip runs in every clone.
const officialExamples = "testdata/official"

// officialExampleCount is how many example bodies OpenAPI 1.8.0 publishes:
// the test fails if some went missing rather than passing on fewer.
const officialExampleCount = 60

// messageFor returns a value of the Go type of a DICT message with root
// element root, or nil.
func messageFor(root string) any {
	switch root {
	case "CreateEntryRequest":
		return &dict.CreateEntryRequest{}
	case "CreateEntryResponse":
		return &dict.CreateEntryResponse{}
	case "GetEntryResponse":
		return &dict.GetEntryResponse{}
	case "UpdateEntryRequest":
		return &dict.UpdateEntryRequest{}
	case "UpdateEntryResponse":
		return &dict.UpdateEntryResponse{}
	case "DeleteEntryRequest":
		return &dict.DeleteEntryRequest{}
	case "DeleteEntryResponse":
		return &dict.DeleteEntryResponse{}
	case "CheckKeysRequest":
		return &dict.CheckKeysRequest{}
	case "CheckKeysResponse":
		return &dict.CheckKeysResponse{}
	case "CreateClaimRequest":
		return &dict.CreateClaimRequest{}
	case "AcknowledgeClaimRequest", "ConfirmClaimRequest", "CancelClaimRequest", "CompleteClaimRequest":
		return &dict.ClaimRequest{}
	case "CreateClaimResponse", "GetClaimResponse", "AcknowledgeClaimResponse", "ConfirmClaimResponse", "CancelClaimResponse", "CompleteClaimResponse":
		return &dict.ClaimResponse{}
	case "ListClaimsResponse":
		return &dict.ListClaimsResponse{}
	case "CreateSyncVerificationRequest":
		return &dict.CreateSyncVerificationRequest{}
	case "CreateSyncVerificationResponse":
		return &dict.CreateSyncVerificationResponse{}
	case "CreateCidSetFileRequest":
		return &dict.CreateCidSetFileRequest{}
	case "CreateCidSetFileResponse", "GetCidSetFileResponse":
		return &dict.CidSetFileResponse{}
	case "ListCidSetEventsResponse":
		return &dict.ListCidSetEventsResponse{}
	case "GetEntryByCidResponse":
		return &dict.GetEntryByCidResponse{}
	case "CreateInfractionReportRequest":
		return &dict.CreateInfractionReportRequest{}
	case "AcknowledgeInfractionReportRequest", "CancelInfractionReportRequest", "CloseInfractionReportRequest":
		return &dict.InfractionReportRequest{}
	case "CreateInfractionReportResponse", "GetInfractionReportResponse", "AcknowledgeInfractionReportResponse",
		"CancelInfractionReportResponse", "CloseInfractionReportResponse":
		return &dict.InfractionReportResponse{}
	case "ListInfractionReportsResponse":
		return &dict.ListInfractionReportsResponse{}
	case "CreateRefundRequest":
		return &dict.CreateRefundRequest{}
	case "CancelRefundRequest", "CloseRefundRequest":
		return &dict.RefundRequest{}
	case "CreateRefundResponse", "GetRefundResponse", "CancelRefundResponse", "CloseRefundResponse":
		return &dict.RefundResponse{}
	case "ListRefundsResponse":
		return &dict.ListRefundsResponse{}
	case "GetOwnerStatisticsResponse":
		return &dict.GetOwnerStatisticsResponse{}
	case "ListPoliciesResponse":
		return &dict.ListPoliciesResponse{}
	case "GetPolicyResponse":
		return &dict.GetPolicyResponse{}
	case "problem":
		return &dict.Problem{}
	}
	return nil
}

// leaves lists every element and attribute of a document as
// "path=value", sorted: what must survive a round trip. Instants compare as
// instants (the DICT writes them with or without milliseconds).
func leaves(t *testing.T, data []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var out, path []string
	var text strings.Builder
	norm := func(s string) string {
		s = strings.TrimSpace(s)
		if tm, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return tm.UTC().Format(time.RFC3339Nano)
		}
		return s
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		switch tk := tok.(type) {
		case xml.StartElement:
			path = append(path, tk.Name.Local)
			text.Reset()
			for _, a := range tk.Attr {
				if a.Name.Space != "xmlns" && a.Name.Local != "xmlns" {
					out = append(out, strings.Join(path, "/")+"@"+a.Name.Local+"="+a.Value)
				}
			}
		case xml.CharData:
			text.Write(tk)
		case xml.EndElement:
			out = append(out, strings.Join(path, "/")+"="+norm(text.String()))
			text.Reset()
			path = path[:len(path)-1]
		}
	}
	sort.Strings(out)
	return out
}

// TestOfficialExamplesRoundTrip decodes every example body of the DICT
// API (OpenAPI 1.8.0) into balde's types and encodes it again: no element,
// attribute or value is lost.
func TestOfficialExamplesRoundTrip(t *testing.T) {
	dir := officialExamples
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.xml"))
	require.NoError(t, err)
	require.Len(t, files, officialExampleCount, "official examples in %s", dir)
	for _, f := range files {
		name, _ := filepath.Rel(dir, f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			var root struct{ XMLName xml.Name }
			require.NoError(t, xml.Unmarshal(data, &root))
			v := messageFor(root.XMLName.Local)
			require.NotNil(t, v, "no type for %s", root.XMLName.Local)
			require.NoError(t, dict.Unmarshal(data, v))
			out, err := dict.Marshal(v)
			require.NoError(t, err)
			require.Equal(t, leaves(t, data), leaves(t, out), "re-encoded:\n%s", out)
		})
	}
}

// TestSignatureKeepsItsNamespace: a signed document round-trips with the
// XMLDSig namespace of its Signature.
func TestSignatureKeepsItsNamespace(t *testing.T) {
	in := `<DeleteEntryRequest><Signature xmlns="http://www.w3.org/2000/09/xmldsig#"><SignedInfo><Reference URI=""></Reference></SignedInfo><SignatureValue>c2ln</SignatureValue></Signature>` +
		`<Key>+5561988880000</Key><Participant>12345678</Participant><Reason>USER_REQUESTED</Reason></DeleteEntryRequest>`
	var req dict.DeleteEntryRequest
	require.NoError(t, dict.Unmarshal([]byte(in), &req))
	require.Equal(t, dict.SignatureNamespace, req.Signature.XMLName.Space)
	out, err := dict.Marshal(&req)
	require.NoError(t, err)
	require.Contains(t, string(out), `<Signature xmlns="http://www.w3.org/2000/09/xmldsig#"><SignedInfo><Reference URI=""></Reference></SignedInfo><SignatureValue>c2ln</SignatureValue></Signature>`)
	require.Equal(t, leaves(t, []byte(in)), leaves(t, out))
	// An unsigned document keeps its empty Signature element.
	out, err = dict.Marshal(&dict.DeleteEntryRequest{Key: "k", Participant: "12345678", Reason: "USER_REQUESTED"})
	require.NoError(t, err)
	require.True(t, slices.Contains(strings.Split(string(out), "\n"), "    <Signature></Signature>"), "%s", out)
}

// TestProblemKeepsViolationsAndCorrelationID: a problem (OpenAPI 1.8.0's
// Problem) round-trips with its correlationId and violations, and names
// the policy its violations name.
func TestProblemKeepsViolationsAndCorrelationID(t *testing.T) {
	in := `<problem xmlns="urn:ietf:rfc:7807"><type>https://dict.pi.rsfn.net.br/api/v2/error/RateLimited</type>` +
		`<title>Rate limited</title><status>429</status><detail>too many</detail><correlationId>a9f13566e19f5ca51329479a5bae60c5</correlationId>` +
		`<violations><violation><reason>no tokens left</reason><value>ENTRIES_READ_USER_ANTISCAN_V2</value><property>policy</property></violation></violations></problem>`
	p, err := dict.DecodeProblem([]byte(in))
	require.NoError(t, err)
	require.Equal(t, "a9f13566e19f5ca51329479a5bae60c5", p.CorrelationID)
	require.True(t, p.Names(dict.PolicyEntriesReadUserAntiscanV2))
	require.False(t, p.Names(dict.PolicyEntriesReadUserAntiscan), "a prefix is not a name")
	out, err := dict.Marshal(p)
	require.NoError(t, err)
	require.Equal(t, leaves(t, []byte(in)), leaves(t, out))

	byDetail := &dict.Problem{Detail: "bucket ENTRIES_READ_PARTICIPANT_ANTISCAN is empty"}
	require.True(t, byDetail.Names(dict.PolicyEntriesReadParticipantAntiscan))
	require.False(t, byDetail.Names(dict.PolicyEntriesReadUserAntiscan))
}
