"""The PyPI client jolokia==0.4.0, unmodified, against jmxgate.

Run by tests/clients/real_clients.rs (which starts the agents and the gateway):
    .venv/bin/python -m unittest -v test_jolokia_client

Every expected value comes from the agent (written first, or asked
directly), so a gateway that changes an answer fails here.
"""

import os
import unittest

import requests
from jolokia import JolokiaClient

GATEWAY = os.environ["JMXGATE_URL"]
USER = os.environ["JMXGATE_USER"]
PASSWORD = os.environ["JMXGATE_PASSWORD"]
A = os.environ["JMXGATE_TARGET_A"]
AGENT_A = os.environ["JMXGATE_AGENT_A_URL"]

TYPES = "jmxgate.test:type=Types"
OPS = "jmxgate.test:type=Operations"
VIRTUAL_A = f"{GATEWAY}/jolokia/targets/{A}"


def direct(request):
    """Agent A's own answer (not through the gateway)."""
    r = requests.post(AGENT_A, json=request, timeout=30)
    r.raise_for_status()
    return r.json()


def direct_value(request):
    answer = direct(request)
    assert answer["status"] == 200, answer
    return answer["value"]


class JolokiaClientThroughGateway(unittest.TestCase):
    def setUp(self):
        self.client = JolokiaClient(VIRTUAL_A, USER, PASSWORD)

    def ok(self, answer):
        """The value of a successful answer (a dict the client parsed)."""
        self.assertIsInstance(answer, dict, answer)
        self.assertEqual(answer.get("status"), 200, answer)
        return answer["value"]

    def test_version(self):
        v = self.ok(self.client.version())
        agent = direct_value({"type": "version"})
        self.assertEqual(v["agent"], agent["agent"])
        self.assertEqual(v["protocol"], agent["protocol"])
        self.assertEqual(v["config"]["agentId"], agent["config"]["agentId"])

    def test_read(self):
        # The client sends "path": null when no path is given.
        for attribute in ["Double", "Special", "Tabular", "Nested", "IntArray", "Date"]:
            got = self.ok(self.client.get_attribute(mbean=TYPES, attribute=attribute))
            self.assertEqual(got, direct_value({"type": "read", "mbean": TYPES, "attribute": attribute}), attribute)
        self.assertEqual(self.ok(self.client.get_attribute(mbean=TYPES, attribute="Composite", path="port")), 8778)
        self.assertEqual(
            self.ok(self.client.get_attribute(mbean=TYPES, attribute="Nested", path="level1/level2/leaf")),
            "deep")

    def test_write_and_read_back(self):
        old = self.ok(self.client.get_attribute(mbean=TYPES, attribute="Name"))
        self.assertEqual(old, direct_value({"type": "read", "mbean": TYPES, "attribute": "Name"}))
        value = "py/written é !"
        self.assertEqual(self.ok(self.client.set_attribute(mbean=TYPES, attr_value_pairs=("Name", value))), old)
        self.assertEqual(self.ok(self.client.get_attribute(mbean=TYPES, attribute="Name")), value)
        self.assertEqual(direct_value({"type": "read", "mbean": TYPES, "attribute": "Name"}), value)
        # Structured values and an inner path.
        self.ok(self.client.set_attribute(mbean=TYPES, attr_value_pairs=("StringArray", ["u", "v"])))
        self.assertEqual(direct_value({"type": "read", "mbean": TYPES, "attribute": "StringArray"}), ["u", "v"])
        self.ok(self.client.set_attribute(mbean=TYPES, attr_value_pairs=("Map", 9), path="one"))
        self.assertEqual(direct_value({"type": "read", "mbean": TYPES, "attribute": "Map"})["one"], 9)

    def test_bulk_read_and_write(self):
        written = self.client.set_attribute(
            mbean=TYPES, attr_value_pairs=[("Int", 2024), ("Counter", 7), ("Flag", True)], bulk=True)
        self.assertIsInstance(written, list, written)
        self.assertEqual([w["status"] for w in written], [200, 200, 200], written)
        read = self.client.get_attribute(mbean=TYPES, attribute=["Int", "Counter", "Flag", "NoSuchAttribute"])
        self.assertIsInstance(read, list, read)
        self.assertEqual([r["status"] for r in read], [200, 200, 200, 404], read)
        self.assertEqual([r["value"] for r in read[:3]], [2024, 7, True])
        for attribute, expected in [("Int", 2024), ("Counter", 7), ("Flag", True)]:
            self.assertEqual(direct_value({"type": "read", "mbean": TYPES, "attribute": attribute}), expected)

    def test_exec(self):
        self.assertEqual(self.ok(self.client.execute(mbean=OPS, operation="add(int,int)", arguments=[3, 4])), 7)
        self.assertEqual(
            self.ok(self.client.execute(mbean=OPS, operation="add(long,long,long)", arguments=[1, 2, 3])), 6)
        self.assertEqual(self.ok(self.client.execute(mbean=OPS, operation="echo", arguments=["ünï/cødé"])), "ünï/cødé")
        self.assertEqual(self.ok(self.client.execute(mbean=OPS, operation="arrayLength", arguments=[["a", "b"]])), 2)
        self.assertEqual(self.ok(self.client.execute(mbean=OPS, operation="sleep", arguments=[50])), 50)

    def test_search(self):
        found = self.ok(self.client.search(mbean="jmxgate.test:type=Pattern,*"))
        self.assertEqual(sorted(found), sorted(direct_value({"type": "search", "mbean": "jmxgate.test:type=Pattern,*"})))
        self.assertEqual(len(found), 2)
        self.assertEqual(self.ok(self.client.search(mbean="nothing.here:*")), [])

    def test_list(self):
        ops = self.ok(self.client.list(path="jmxgate.test/type=Operations"))
        self.assertEqual(ops, direct_value({"type": "list", "path": "jmxgate.test/type=Operations"}))
        self.assertIn("sleep", ops["op"])
        # No path: the client sends "path": null; the whole tree.
        everything = self.ok(self.client.list())
        agent = direct_value({"type": "list"})
        self.assertEqual(sorted(everything), sorted(agent))
        self.assertEqual(everything["jmxgate.test"], agent["jmxgate.test"])

    def test_errors(self):
        cases = [
            (self.client.get_attribute(mbean="jmxgate.test:type=Nowhere", attribute="X"),
             404, "javax.management.InstanceNotFoundException"),
            (self.client.get_attribute(mbean=TYPES, attribute="NoSuchAttribute"),
             404, "javax.management.AttributeNotFoundException"),
            (self.client.execute(mbean=OPS, operation="fail", arguments=[]), 500, "java.lang.IllegalStateException"),
            # Denied by the gateway's policy; never reaches the agent.
            (self.client.execute(mbean=OPS, operation="repeat", arguments=["x", 2]), 403,
             "java.lang.SecurityException"),
        ]
        # A read-only attribute: the agent's own verdict, whatever it is.
        readonly = direct({"type": "write", "mbean": TYPES, "attribute": "LongMax", "value": 1})
        self.assertNotEqual(readonly["status"], 200, readonly)
        cases.append((self.client.set_attribute(mbean=TYPES, attr_value_pairs=("LongMax", 1)),
                      readonly["status"], readonly["error_type"]))
        for answer, status, error_type in cases:
            self.assertIsInstance(answer, dict, answer)
            self.assertEqual(answer["status"], status, answer)
            self.assertIn("error", answer)
            self.assertEqual(answer["error_type"], error_type, answer)

    def test_basic_auth_refusals(self):
        for client in [JolokiaClient(VIRTUAL_A), JolokiaClient(VIRTUAL_A, USER, "not-" + PASSWORD)]:
            # An empty 401 body: the client hands back the requests.Response.
            answer = client.version()
            self.assertIsInstance(answer, requests.Response)
            self.assertEqual(answer.status_code, 401)
            self.assertTrue(answer.headers["WWW-Authenticate"].startswith('Basic realm="jmxgate"'))


if __name__ == "__main__":
    unittest.main(verbosity=2)
