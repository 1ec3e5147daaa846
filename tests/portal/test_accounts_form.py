"""The training form offers the Slurm user's own accounts and QoS from the dev cluster's slurmdbd."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from tests.portal.conftest import assert_no_exception
from tests.slurm_fixture import DevCluster, slurm_cluster  # noqa: F401  (fixture)


@pytest.mark.slurm
@pytest.mark.slurmdbd
def test_training_form_offers_the_users_accounts_and_qos(app: Callable[..., AppTest], slurm_cluster: DevCluster,  # noqa: F811
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    slurm_cluster.need("dbd")
    monkeypatch.setenv("FLOWTRAIN_SCHEDULER", "slurm")
    at = app()
    account = next(s for s in at.selectbox if s.label == "Slurm account")
    assert account.options == ["None", "root", "ml"]  # None: the default account (root)
    account.set_value("ml").run()
    assert_no_exception(at)
    qos = next(s for s in at.selectbox if s.label == "QoS")
    assert qos.options == ["None", "normal", "short"]
    qos.set_value("short").run()
    assert_no_exception(at)
    assert (next(s for s in at.selectbox if s.label == "Slurm account").value,
            next(s for s in at.selectbox if s.label == "QoS").value) == ("ml", "short")
