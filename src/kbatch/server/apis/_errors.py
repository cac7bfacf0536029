"""Kafka error codes the handlers answer with, and the mapping from kbatch exceptions."""
import logging

from ...errors import KBatchError

logger = logging.getLogger("kbatch.server")

NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
TOPIC_AUTHORIZATION_FAILED = 29
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87


def code_of(exc: Exception, what: str) -> int:
    """Kafka's error code for an exception raised while serving `what`."""
    if isinstance(exc, KBatchError):
        return exc.error_code if exc.error_code is not None else CORRUPT_MESSAGE
    logger.exception("Unexpected error while serving %s", what)
    return UNKNOWN_SERVER_ERROR


def check_leader_epoch(current: int, ours: int) -> int:
    """A client's current_leader_epoch against ours (Partition.checkCurrentLeaderEpoch)."""
    if current < 0 or current == ours:
        return NONE
    return FENCED_LEADER_EPOCH if current < ours else UNKNOWN_LEADER_EPOCH
