"""kbatch.log.topics: the one rule for which topics a directory read takes."""
from kbatch.log.layout import Partition
from kbatch.log.topics import TopicSelection, is_internal_topic, left_out, select_partitions


def test_internal_topics_are_kafkas_and_the_registrys():
    for name in ("__consumer_offsets", "__transaction_state", "__cluster_metadata", "__remote_log_metadata",
                 "__share_group_state", "__anything", "_schemas"):
        assert is_internal_topic(name), name
    for name in ("orders", "_orders", "_schemas2", "schemas", "a__b"):
        assert not is_internal_topic(name), name


def test_left_out_unless_named_or_asked_for():
    assert left_out("__consumer_offsets", named=False, include_internal=False)
    assert not left_out("__consumer_offsets", named=True, include_internal=False)
    assert not left_out("__consumer_offsets", named=False, include_internal=True)
    assert not left_out("orders", named=False, include_internal=False)


def test_selection_names_globs_and_exclusions():
    names = ["orders", "orders-dlq", "payments", "__consumer_offsets", "_schemas"]

    def taken(sel):
        return [n for n in names if sel(n)]
    assert taken(TopicSelection.of()) == ["orders", "orders-dlq", "payments"]
    assert taken(TopicSelection.of(include_internal=True)) == names
    assert taken(TopicSelection.of(["orders*"], exclude=["*-dlq"])) == ["orders"]
    assert taken(TopicSelection.of(["_*"])) == []  # a glob is not a name: internal topics need the option
    assert taken(TopicSelection.of(["_*"], include_internal=True)) == ["__consumer_offsets", "_schemas"]
    assert taken(TopicSelection.of(["_schemas", "payments"])) == ["payments", "_schemas"]


def test_a_root_that_is_the_partition_is_read(tmp_path):
    root = str(tmp_path / "__consumer_offsets-0")
    part = Partition("__consumer_offsets", 0, root, "broker")
    assert select_partitions([part], root, TopicSelection.of()) == [part]
    assert select_partitions([part], str(tmp_path), TopicSelection.of()) == []
    assert select_partitions([part], root, TopicSelection.of(["orders"])) == []
