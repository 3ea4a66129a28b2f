package sqs

import (
	"errors"
	"net/http"
	"slices"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// class is what to do about a failed request.
type class int

const (
	// retry: no answer (network, timeout), throttling, or a server error. The
	// request is sent again in place, with backoff, for as long as it takes.
	retry class = iota
	// refused: SQS refused the request for what it carries (too large, an invalid
	// parameter or character). For one entry it is that event's *sink.EventError;
	// a request of several is sent again one entry per request to find which.
	refused
	// unusable: the queue cannot take any message (it does not exist, sending to it
	// is not allowed, its KMS key is unusable): an *sink.EventError for each entry.
	unusable
	// rejected: SQS does not accept the credentials, or there are none. A plain
	// error: the relay treats the broker as unavailable and streams the events again.
	rejected
)

func (c class) String() string {
	return [...]string{"retry", "refused", "unusable", "rejected"}[c]
}

// Error codes by what they mean. SQS's JSON errors carry a type and, for clients
// of the older Query protocol, a code; the SDK reports the latter when present, so
// both spellings are listed.
var (
	throttleCodes = []string{"RequestThrottled", "ThrottlingException", "Throttling", "KmsThrottled",
		"ServiceUnavailable", "InternalError", "InternalFailure", "RequestTimeout", "RequestTimeoutException",
		"AWS.SimpleQueueService.InternalError"}
	unusableCodes = []string{"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "QueueDeletedRecently",
		"AWS.SimpleQueueService.QueueDeletedRecently", "AccessDenied", "AccessDeniedException", "KmsAccessDenied",
		"KmsDisabled", "KmsNotFound", "KmsInvalidState", "KmsInvalidKeyUsage", "KmsOptInRequired", "InvalidAddress",
		"UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation"}
	credentialCodes = []string{"InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch",
		"IncompleteSignature", "MissingAuthenticationToken", "MissingAuthenticationTokenException", "ExpiredToken",
		"ExpiredTokenException", "InvalidSecurity", "AuthFailure", "InvalidAccessKeyId", "RequestExpired"}
)

// classify decides on an error of a whole request.
func classify(err error) class {
	var signErr *v4.SigningError
	if errors.As(err, &signErr) {
		return rejected // no credentials could be had
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return retry // no answer, or not one SQS would give (a proxy's error page, say)
	}
	code := apiErr.ErrorCode()
	switch {
	case slices.Contains(throttleCodes, code):
		return retry
	case slices.Contains(unusableCodes, code):
		return unusable
	case slices.Contains(credentialCodes, code):
		return rejected
	case apiErr.ErrorFault() == smithy.FaultServer:
		return retry
	case apiErr.ErrorFault() == smithy.FaultClient:
		return refused
	}
	var respErr *awshttp.ResponseError // an error of no known fault: its HTTP status decides
	if errors.As(err, &respErr) {
		if s := respErr.HTTPStatusCode(); s >= 500 || s == http.StatusTooManyRequests {
			return retry
		}
		return refused
	}
	return retry
}
