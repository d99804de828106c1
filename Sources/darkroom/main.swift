import DarkroomCLI
import Foundation

exit(DarkroomCLI.run(CommandLine.arguments))
