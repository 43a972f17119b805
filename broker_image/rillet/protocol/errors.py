"""Kafka errors as exceptions carrying their wire error code.

Lower layers (storage, metadata, coordinator) raise these; API handlers turn
each into the error code of the partition/topic/group it concerns. Anything
that is not a KafkaError becomes UNKNOWN_SERVER_ERROR and is logged.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class KafkaError(Exception):
    code: int = -1
    retriable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or type(self).__name__)
        self.message = message or None


def _error(name: str, code: int, retriable: bool = False) -> type[KafkaError]:
    cls = type(name, (KafkaError,), {"code": code, "retriable": retriable})
    _BY_CODE[code] = cls
    return cls


_BY_CODE: dict[int, type[KafkaError]] = {}

UnknownServerError = _error("UnknownServerError", -1)
OffsetOutOfRange = _error("OffsetOutOfRange", 1)
CorruptMessage = _error("CorruptMessage", 2, True)
UnknownTopicOrPartition = _error("UnknownTopicOrPartition", 3, True)
InvalidFetchSize = _error("InvalidFetchSize", 4)
LeaderNotAvailable = _error("LeaderNotAvailable", 5, True)
NotLeaderOrFollower = _error("NotLeaderOrFollower", 6, True)
RequestTimedOut = _error("RequestTimedOut", 7, True)
BrokerNotAvailable = _error("BrokerNotAvailable", 8, True)
MessageTooLarge = _error("MessageTooLarge", 10)
CoordinatorLoadInProgress = _error("CoordinatorLoadInProgress", 14, True)
CoordinatorNotAvailable = _error("CoordinatorNotAvailable", 15, True)
NotCoordinator = _error("NotCoordinator", 16, True)
InvalidTopicException = _error("InvalidTopicException", 17)
RecordListTooLarge = _error("RecordListTooLarge", 18)
NotEnoughReplicas = _error("NotEnoughReplicas", 19, True)
NotEnoughReplicasAfterAppend = _error("NotEnoughReplicasAfterAppend", 20, True)
InvalidRequiredAcks = _error("InvalidRequiredAcks", 21)
IllegalGeneration = _error("IllegalGeneration", 22)
InconsistentGroupProtocol = _error("InconsistentGroupProtocol", 23)
InvalidGroupId = _error("InvalidGroupId", 24)
UnknownMemberId = _error("UnknownMemberId", 25)
InvalidSessionTimeout = _error("InvalidSessionTimeout", 26)
RebalanceInProgress = _error("RebalanceInProgress", 27)
InvalidCommitOffsetSize = _error("InvalidCommitOffsetSize", 28)
TopicAuthorizationFailed = _error("TopicAuthorizationFailed", 29)
GroupAuthorizationFailed = _error("GroupAuthorizationFailed", 30)
UnsupportedVersion = _error("UnsupportedVersion", 35)
TopicAlreadyExists = _error("TopicAlreadyExists", 36)
InvalidPartitions = _error("InvalidPartitions", 37)
InvalidReplicationFactor = _error("InvalidReplicationFactor", 38)
InvalidReplicaAssignment = _error("InvalidReplicaAssignment", 39)
InvalidConfig = _error("InvalidConfig", 40)
NotController = _error("NotController", 41, True)
InvalidRequest = _error("InvalidRequest", 42)
UnsupportedForMessageFormat = _error("UnsupportedForMessageFormat", 43)
PolicyViolation = _error("PolicyViolation", 44)
OutOfOrderSequenceNumber = _error("OutOfOrderSequenceNumber", 45)
DuplicateSequenceNumber = _error("DuplicateSequenceNumber", 46)
InvalidProducerEpoch = _error("InvalidProducerEpoch", 47)
InvalidTxnState = _error("InvalidTxnState", 48)
InvalidProducerIdMapping = _error("InvalidProducerIdMapping", 49)
InvalidTransactionTimeout = _error("InvalidTransactionTimeout", 50)
TransactionCoordinatorFenced = _error("TransactionCoordinatorFenced", 52)
ConcurrentTransactions = _error("ConcurrentTransactions", 51, True)
OperationNotAttempted = _error("OperationNotAttempted", 55)
ProducerFenced = _error("ProducerFenced", 90)
TransactionalIdNotFound = _error("TransactionalIdNotFound", 105)
# KIP-890: the transaction cannot go on, the client aborts it (Produce v11+, AddPartitionsToTxn v5).
TransactionAbortable = _error("TransactionAbortable", 120)
ClusterAuthorizationFailed = _error("ClusterAuthorizationFailed", 31)
ReassignmentInProgress = _error("ReassignmentInProgress", 60)
UnknownLeaderEpoch = _error("UnknownLeaderEpoch", 75, True)
FetchSessionIdNotFound = _error("FetchSessionIdNotFound", 70, True)
InvalidFetchSessionEpoch = _error("InvalidFetchSessionEpoch", 71, True)
FencedLeaderEpoch = _error("FencedLeaderEpoch", 74, True)
KafkaStorageError = _error("KafkaStorageError", 56, True)
NonEmptyGroup = _error("NonEmptyGroup", 68)
GroupIdNotFound = _error("GroupIdNotFound", 69)
GroupSubscribedToTopic = _error("GroupSubscribedToTopic", 86)
MemberIdRequired = _error("MemberIdRequired", 79)
FencedInstanceId = _error("FencedInstanceId", 82)
InvalidRecord = _error("InvalidRecord", 87)
ElectionNotNeeded = _error("ElectionNotNeeded", 84)
EligibleLeadersNotAvailable = _error("EligibleLeadersNotAvailable", 83, True)
PreferredLeaderNotAvailable = _error("PreferredLeaderNotAvailable", 80, True)
NoReassignmentInProgress = _error("NoReassignmentInProgress", 85)
UnstableOffsetCommit = _error("UnstableOffsetCommit", 88, True)
UnknownProducerId = _error("UnknownProducerId", 59)
UnknownTopicId = _error("UnknownTopicId", 100, True)
InconsistentTopicId = _error("InconsistentTopicId", 103, True)
OffsetNotAvailable = _error("OffsetNotAvailable", 78, True)
TransactionalIdAuthorizationFailed = _error("TransactionalIdAuthorizationFailed", 53)
TopicDeletionDisabled = _error("TopicDeletionDisabled", 73)
UnsupportedEndpointType = _error("UnsupportedEndpointType", 119)
InconsistentClusterId = _error("InconsistentClusterId", 104)
InvalidUpdateVersion = _error("InvalidUpdateVersion", 95)
IneligibleReplica = _error("IneligibleReplica", 107)
BrokerIdNotRegistered = _error("BrokerIdNotRegistered", 102)
StaleBrokerEpoch = _error("StaleBrokerEpoch", 77)
DuplicateBrokerRegistration = _error("DuplicateBrokerRegistration", 101)
UnsupportedSaslMechanism = _error("UnsupportedSaslMechanism", 33)
IllegalSaslState = _error("IllegalSaslState", 34)
SecurityDisabled = _error("SecurityDisabled", 54)
SaslAuthenticationFailed = _error("SaslAuthenticationFailed", 58)
ResourceNotFound = _error("ResourceNotFound", 91)
DuplicateResource = _error("DuplicateResource", 92)
UnacceptableCredential = _error("UnacceptableCredential", 93)


def error_for_code(code: int) -> type[KafkaError]:
    return _BY_CODE.get(code, UnknownServerError)


def code_of(exc: BaseException, action: str) -> int:
    """The wire code a handler answers for ``exc`` while doing ``action``.

    A KafkaError is an answer, not a problem. Anything else is logged with its
    traceback and answered for that one partition/group/resource, never by closing
    the connection: an OSError as KAFKA_STORAGE_ERROR (as Kafka does for a failing
    disk), the rest as UNKNOWN_SERVER_ERROR.
    """
    if isinstance(exc, KafkaError):
        return exc.code
    log.error("%s failed", action, exc_info=exc)
    return (KafkaStorageError if isinstance(exc, OSError) else UnknownServerError).code


def message_of(exc: BaseException) -> str | None:
    """The error_message for a response: ours, or a pointer to the broker log."""
    if isinstance(exc, KafkaError):
        return exc.message
    return f"{type(exc).__name__} on the broker (see its log)"
OffsetMetadataTooLarge = _error("OffsetMetadataTooLarge", 12)
GroupMaxSizeReached = _error("GroupMaxSizeReached", 81)
