"""Trace loaders on fixtures (tests/data/traces: the first rows of each real file), the mapping
to instances, and malformed rows named by file, row and column."""
import math
import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from oasis_opt import solve
from oasis_opt.model import validate
from oasis_opt.model.io import FormatError, instance_from_dict, instance_to_dict
from oasis_opt.sim.greedy import GreedyPolicy
from oasis_opt.workloads.traces import (PHILLY_COLUMNS, PHILLY_FULL_SIZE, PhillyCluster,
                                        PhillyFilter, TraceMapping, load_helios_utilisation,
                                        pai_cluster, philly_cluster, philly_instance, philly_jobs,
                                        pollux_instance, read_philly, tiresias_instance,
                                        trace_root)

FIXTURES = Path(__file__).parent / "data" / "traces"


@pytest.fixture()
def root(tmp_path):
    """A writable copy of the fixture folder."""
    dst = tmp_path / "traces"
    shutil.copytree(FIXTURES, dst)
    return dst


def corrupt(path: Path, row: int, column: str, value: str) -> None:
    """Set ``column`` of data row ``row`` (file row numbers: header = 1) to ``value``."""
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    fields = lines[row - 1].split(",")
    fields[header.index(column)] = value
    lines[row - 1] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")


def test_packaged_traces_are_the_shared_files():
    packaged = trace_root()
    for rel in ("philly/philly_2017-11.csv", "philly/philly_multigpu.csv",
                "pai-2020/pai_machine_spec.csv", "helios-util/earth_vc6YE_10min.csv"):
        assert (packaged / rel).is_file()
        folder = (packaged / rel).parent
        assert list(folder.glob("LICENSE*")), f"no licence next to {rel}"
    # the fixtures are the first rows of the same files
    head = (packaged / "philly/philly_2017-11.csv").read_text().splitlines()[:41]
    assert (FIXTURES / "philly/philly_2017-11.csv").read_text().splitlines() == head


def test_read_philly_fixture():
    jobs = read_philly(FIXTURES / "philly/philly_2017-11.csv")
    assert len(jobs) == 40
    first = jobs[0]
    assert (first.row, first.submitted, first.duration_s, first.gpus, first.cluster) == \
        (2, datetime(2017, 11, 1, 0, 2, 12), 97.0, 1, "11cb48")


def test_philly_instance_mapping(root):
    two_racks = PhillyCluster(racks=2)
    inst = philly_instance("2017-11-01", 1, seed=3, slot_s=600, cluster=two_racks, root=root)
    rows = philly_jobs("2017-11-01", 1, root=root)
    assert inst.I == len(rows) == 40
    for job, r in zip(inst.jobs, rows):
        offset = (r.submitted - datetime(2017, 11, 1)).total_seconds()
        assert job.arrival == int(offset // 600) + 1
        assert job.chunks == r.gpus
        assert job.epochs == math.ceil(r.duration_s / 600)
        assert job.work == math.ceil(r.gpus * r.duration_s / 600 - 1e-9)
        assert job.min_duration == math.ceil(r.duration_s / 600)
        assert job.provenance["virtual_cluster"] == r.cluster
        assert job.provenance["model"] in ("cifar10", "ncf", "deepspeech2", "bert", "yolov3",
                                           "imagenet")
        assert job.utility.target >= job.min_duration - 1 + 1 - 1e-9
        assert inst.ps_needed(inst.job_index[job.id], job.chunks) == math.ceil(
            job.chunks / min(job.chunks, 4))
    assert list(inst.arrival) == sorted(inst.arrival)  # submission order
    assert inst.horizon == max(j.arrival + j.min_duration - 1 for j in inst.jobs) + 24
    # seeded: same seed, same instance; another seed, other utilities
    again = philly_instance("2017-11-01", 1, seed=3, slot_s=600, cluster=two_racks, root=root)
    assert instance_to_dict(again) == instance_to_dict(inst)
    other = philly_instance("2017-11-01", 1, seed=4, slot_s=600, cluster=two_racks, root=root)
    assert [j.utility for j in other.jobs] != [j.utility for j in inst.jobs]
    # a valid instance: JSON round trip, and greedy's schedule validates
    assert instance_to_dict(instance_from_dict(instance_to_dict(inst))) == instance_to_dict(inst)
    assert validate(inst, GreedyPolicy().solve(inst)).ok


def test_philly_options(root):
    inst = philly_instance("2017-11-01 00:00:00", 0.25, slot_s=60, root=root,
                           select=PhillyFilter(clusters=["6c71a0"]),
                           mapping=TraceMapping(oversubscription=4.0, progress="placement"))
    assert {j.provenance["virtual_cluster"] for j in inst.jobs} == {"6c71a0"}
    assert inst.progress == "placement" and inst.topology is not None
    assert inst.meta["oversubscription"] == 4.0
    multi = philly_instance("2017-09-04", 19, root=root,
                            select=PhillyFilter(source="multigpu", max_jobs=5))
    assert multi.I == 5 and min(multi.chunks) >= 2


@pytest.mark.parametrize("kwargs, match", [
    ({"start": "2017-10-30", "days": 3}, "not inside the 'month' digest"),
    ({"start": "1 Nov 2017", "days": 1}, "start: expected"),
    ({"start": "2017-11-01", "days": 0}, "days: must be"),
    ({"start": "2017-11-01", "days": 1, "source": "year"}, "source: expected"),
    ({"start": "2017-11-01", "days": 1, "clusters": ["nope"]}, "unknown virtual cluster"),
])
def test_philly_window_errors(root, kwargs, match):
    with pytest.raises(ValueError, match=match):
        philly_jobs(root=root, **kwargs)


def test_philly_empty_window(root):
    with pytest.raises(ValueError, match="no trace job"):
        philly_instance("2017-11-20", 1, root=root)


@pytest.mark.parametrize("row, column, value, message", [
    (5, "duration", "-3", "must be > 0"),
    (7, "num_gpus", "two", "expected an integer"),
    (9, "num_gpus", "1.5", "expected an integer"),
    (4, "timestamp", "2017/11/01 00:03", "expected a time"),
    (12, "gpu_time", "1.0", "duration x num_gpus"),
    (3, "cluster", " ", "non-empty"),
    (6, "duration", "nan", "must be finite"),
])
def test_malformed_philly_rows_are_named(root, row, column, value, message):
    path = root / "philly" / "philly_2017-11.csv"
    corrupt(path, row, column, value)
    with pytest.raises(FormatError, match=message) as err:
        philly_instance("2017-11-01", 1, root=root)
    assert err.value.field == f"philly_2017-11.csv row {row} column {column}"
    assert isinstance(err.value, ValueError)


def test_malformed_structure_is_named(root):
    path = root / "philly" / "philly_2017-11.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1], lines[2] + ",extra"] + lines[3:]) + "\n")
    with pytest.raises(FormatError) as err:
        read_philly(path)
    assert err.value.field == "philly_2017-11.csv row 3" and "expected 6 fields" in str(err.value)
    path.write_text(",".join(reversed(PHILLY_COLUMNS)) + "\n")
    with pytest.raises(FormatError, match="expected the header") as err:
        read_philly(path)
    assert err.value.field == "philly_2017-11.csv row 1"
    with pytest.raises(FormatError, match="cannot read"):
        read_philly(root / "philly" / "missing.csv")


def test_pai_cluster_from_the_machine_spec(root):
    workers, pss = pai_cluster(root)
    assert len(workers) == 20 and len(pss) == 4  # fixture: 4 machines of each type
    assert {s.kind for s in workers} == {"MISC", "P100", "T4", "V100", "V100M32"}
    assert all(s.capacity["gpu"] in (2.0, 8.0) and s.capacity["bw"] == 12.5 * s.capacity["gpu"]
               for s in workers)
    assert all(s.capacity["gpu"] == 0 for s in pss)
    racks = {s.rack for s in workers}
    assert {s.rack for s in pss} <= racks
    assert all(len({s.kind for s in workers if s.rack == r}) == 1 for r in racks)
    w2, p2 = pai_cluster(root, machines=5, seed=1)
    assert len(w2) == 5 and len({s.kind for s in w2}) == 5  # stratified: one of each type
    assert pai_cluster(root, machines=5, seed=1) == (w2, p2)
    with pytest.raises(ValueError, match="machines: at most 20"):
        pai_cluster(root, machines=21)


def test_pai_full_spec_and_heterogeneous_instance():
    workers, pss = pai_cluster()
    assert len(workers) == 1814 and len(pss) == 83
    kinds = [s.kind for s in workers]
    assert kinds.count("P100") == 798 and kinds.count("V100M32") == 135
    inst = philly_instance("2017-11-01", 0.2, seed=2,
                           cluster=PhillyCluster(kind="pai", pai_machines=40))
    assert inst.H == 40 and {s.kind for s in inst.worker_servers} >= {"P100", "T4"}


def test_malformed_pai_rows(root):
    path = root / "pai-2020" / "pai_machine_spec.csv"
    corrupt(path, 3, "cap_gpu", "4")  # a CPU machine with GPUs
    with pytest.raises(FormatError) as err:
        pai_cluster(root)
    assert err.value.field == "pai_machine_spec.csv row 3 column cap_gpu"


def test_pollux_workload(root):
    inst = pollux_instance(1, seed=0, root=root)
    assert inst.I == 20
    apps = [j.provenance["model"] for j in inst.jobs]
    assert set(apps) <= {"cifar10", "ncf", "deepspeech2", "bert", "yolov3", "imagenet"}
    for j in inst.jobs:
        gpu_h = j.provenance["gpu_hours"]
        assert j.provenance["duration_s"] * j.chunks == pytest.approx(gpu_h * 3600)
    corrupt(root / "pollux-workloads" / "workload-1.csv", 4, "application", "gpt")
    with pytest.raises(FormatError) as err:
        pollux_instance(1, root=root)
    assert err.value.field == "workload-1.csv row 4 column application"
    with pytest.raises(ValueError, match="workloads 1..8"):
        pollux_instance(9, root=root)


def test_tiresias_fixture(root):
    inst = tiresias_instance(root=root)
    assert inst.I == 60 and inst.H == 16 and all(s.capacity["gpu"] == 4 for s in inst.worker_servers)
    assert sorted(set(inst.chunks.tolist())) == [1, 2, 4, 8]
    assert inst.jobs[0].provenance["model"] == "vgg19"
    assert tiresias_instance(spec="n32g4.csv", root=root).H == 32
    corrupt(root / "tiresias" / "60_job.csv", 10, "model_name", "gpt")
    with pytest.raises(FormatError) as err:
        tiresias_instance(root=root)
    assert err.value.field == "60_job.csv row 10 column model_name"


def test_helios_series(root):
    times, util = load_helios_utilisation(root)
    assert len(util) == 144 and util[0] == 0.779
    assert times[1] - times[0] == np.timedelta64(600, "s")
    corrupt(root / "helios-util" / "earth_vc6YE_10min.csv", 5, "gpu_utilization", "0.5")
    with pytest.raises(FormatError) as err:
        load_helios_utilisation(root)
    assert err.value.field == "earth_vc6YE_10min.csv row 5 column gpu_utilization"


def test_philly_cluster_layout():
    workers, pss = philly_cluster(racks=3, servers_per_rack=2, ps_per_rack=1)
    assert [s.rack for s in workers] == ["rack-00", "rack-00", "rack-01", "rack-01", "rack-02",
                                         "rack-02"]
    assert [s.rack for s in pss] == ["rack-00", "rack-01", "rack-02"]
    with pytest.raises(ValueError, match="racks"):
        philly_cluster(racks=0)


def test_philly_full_size_replay():
    """Philly's full size: 550 servers (440 with 8 GPUs, 110 PS servers); OASiS replays the first
    jobs of a day there with a schedule the validator accepts."""
    workers, pss = philly_cluster(**PHILLY_FULL_SIZE)
    assert (len(workers), len(pss)) == (440, 110)
    assert sum(s.capacity["gpu"] for s in workers) == 3520
    inst = philly_instance("2017-11-01", 1, seed=0, cluster=PhillyCluster(**PHILLY_FULL_SIZE),
                           select=PhillyFilter(max_jobs=150))
    assert inst.H + inst.K == 550
    sched = solve(inst, "oasis")
    assert validate(inst, sched).ok
    assert sum(sched.admitted) == inst.I  # nearly empty: every job fits at the floor prices
