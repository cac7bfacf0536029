package kbatch.spark;

import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.Serializable;

import org.apache.hadoop.conf.Configuration;

/** A Hadoop Configuration that travels to executors (Configuration is Writable, not Serializable). */
final class SerializableConfiguration implements Serializable {
    private static final long serialVersionUID = 1L;

    private transient Configuration conf;

    SerializableConfiguration(Configuration conf) {
        this.conf = conf;
    }

    Configuration get() {
        return conf;
    }

    private void writeObject(ObjectOutputStream out) throws IOException {
        out.defaultWriteObject();
        conf.write(out);
    }

    private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
        in.defaultReadObject();
        conf = new Configuration(false);
        conf.readFields(in);
    }
}
