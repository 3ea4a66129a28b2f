// Package sqsserver is a small Amazon SQS server for tests: the AWS JSON 1.0
// protocol that aws-sdk-go-v2's SQS client speaks, on a free loopback port, with the
// operations a producer needs (CreateQueue, GetQueueUrl, GetQueueAttributes,
// SendMessageBatch) and a Go API to read what it stored and every request it got.
//
// Why a server of our own: goaws, the Go SQS server, is served by the module proxy
// only up to v0.4.5, which speaks the Query protocol alone (the SDK has used JSON
// since sqs v1.28), and its SendMessageBatch neither reads message attributes nor
// reports entries one by one. ElasticMQ and LocalStack are not Go and cannot be
// installed here.
//
// What it implements of SQS's documented behaviour:
//   - standard and FIFO queues (a FIFO queue's name ends in .fifo), the queue URL
//     built from the Host the client used, so a proxy in front stays in the path;
//   - SendMessageBatch limits: 1 to 10 entries, distinct entry ids of at most 80
//     letters, digits, '-' and '_', the request's total size (Options.MaxBatchBytes,
//     1 MiB as AWS documents it), each message's size (body, attribute names, types
//     and values) against the queue's MaximumMessageSize (1 MiB unless set), at most
//     10 message attributes with valid names and non-empty values, a non-empty body of
//     the characters SQS allows;
//   - FIFO: MessageGroupId and MessageDeduplicationId required (no content-based
//     deduplication), a repeat of a deduplication id within the window (5 minutes,
//     Options.DedupWindow) acknowledged but not stored, messages stored in arrival
//     order with a sequence number; a standard queue refuses a deduplication id;
//   - errors as SQS sends them: the __type and message body with the
//     x-amzn-query-error header; a refused entry is a Failed result with SenderFault
//     true, the rest of the batch is stored;
//   - requests must be SigV4-signed for the sqs service (the signature itself is
//     not verified).
//
// What it does not: receiving, visibility, deleting (tests read the stored messages
// through Messages), real throttling, FIFO high-throughput partitions, IAM. Faults
// are injected by the test (Server.FailRequests, Server.FailEntries).
package sqsserver
